// Moved to lib/stackfiles.ts (the deployed program reads stack files too; programs never import tools/).
export * from "../lib/stackfiles";
