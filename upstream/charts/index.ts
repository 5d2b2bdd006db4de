import type { ChartFacts } from "../types";

/** Values keys of every Helm chart the product installs, one entry per pinned chart version. */
export const charts: readonly ChartFacts[] = [];
