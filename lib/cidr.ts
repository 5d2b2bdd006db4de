// Moved to config/cidr.ts: stack-file validation needs it, and config/ imports nothing from lib/.
export * from "../config/cidr";
