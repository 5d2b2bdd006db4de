import type { ChartFacts } from "../types";

/**
 * cert-manager chart v1.19.1 (https://charts.jetstack.io): the values keys the product sets (lib/edge.ts
 * `certManagerValues`). `crds.enabled` installs the CRDs as templates and `crds.keep` adds `helm.sh/resource-policy:
 * keep` to them (templates/_helpers.tpl `cert-manager.crd-check` refuses the deprecated `installCRDs` together with
 * them); `replicaCount` is the controller Deployment's replicas (leader election keeps one active).
 */
export const certManagerChart: ChartFacts = {
    chart: "cert-manager",
    repository: "https://charts.jetstack.io",
    version: "v1.19.1",
    source: "cert-manager/cert-manager@001eb00d7f276ebcb4f84ffa8ba9255d9292b8c8:deploy/charts/cert-manager/values.yaml",
    note: "Read at 001eb00d (the stored snapshot of the default branch; the v1.19.1 tag is not in it) from values.yaml and templates/_helpers.tpl. Only the keys the product sets are listed; re-read at the tag before adding any.",
    // `extraArgs`: extra controller flags (values.yaml `extraArgs: []`), here `--issuer-ambient-credentials`.
    valuesKeys: ["crds.enabled", "crds.keep", "replicaCount", "installCRDs", "extraArgs"],
};
