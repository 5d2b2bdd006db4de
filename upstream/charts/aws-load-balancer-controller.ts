import type { ChartFacts } from "../types";

/**
 * AWS Load Balancer Controller chart 3.5.0 (https://aws.github.io/eks-charts; source
 * kubernetes-sigs/aws-load-balancer-controller@v3.5.0:helm/aws-load-balancer-controller): the values keys the product
 * sets (lib/aws-load-balancer-controller.ts `lbcValues`). `clusterName` is required (templates/deployment.yaml
 * `--cluster-name`, `required`); `region` and `vpcId` become `--aws-region` / `--aws-vpc-id` (otherwise read from
 * IMDS, which EKS spoke nodes answer one hop only); `serviceAccount.create`/`.name` name the account the Pod Identity
 * association binds (templates/_helpers.tpl `serviceAccountName`); `enableServiceMutatorWebhook: false` drops the
 * webhook that would turn every `type: LoadBalancer` Service into an NLB; `createIngressClassResource: false` (no
 * Ingress); `replicaCount` (leader election keeps one active); `nodeSelector` on the Deployment.
 */
export const awsLoadBalancerControllerChart: ChartFacts = {
    chart: "aws-load-balancer-controller",
    repository: "https://aws.github.io/eks-charts",
    version: "3.5.0",
    source: "kubernetes-sigs/aws-load-balancer-controller@v3.5.0:helm/aws-load-balancer-controller/values.yaml",
    note: "Read at the v3.5.0 tag (11eb202c) from values.yaml, templates/deployment.yaml and templates/_helpers.tpl. Only the keys the product sets are listed.",
    valuesKeys: [
        "clusterName",
        "region",
        "vpcId",
        "replicaCount",
        "serviceAccount.create",
        "serviceAccount.name",
        "enableServiceMutatorWebhook",
        "createIngressClassResource",
    ],
    /** `toYaml .Values.nodeSelector` in templates/deployment.yaml. */
    openSubtrees: ["nodeSelector"],
};
