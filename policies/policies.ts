import type { Policy } from "@pulumi/policy";
import { awsPolicies } from "./aws";
import { edgeTlsPolicies } from "./edge-tls";
import { efaPolicies } from "./efa";
import { gatewayPolicies } from "./gateway";
import { dynamoPolicies } from "./dynamo";
import { mooncakePolicies } from "./mooncake";
import { rdmaFabricPolicies } from "./rdma-fabric";
import { rdmaPlatformPolicies } from "./rdma-platform";
import { rdmaWorkloadPolicies } from "./rdma-workloads";
import { failClosed } from "./lib/unknown";
import { visibilityPolicies } from "./visibility";
import { pdCompatPolicies } from "./pd-compat";
import { upstreamPolicies } from "./upstream";
import { rolloutPolicies } from "./rollout";
import { spokeSecretPolicies } from "./spoke-secrets";

/** Name of the policy pack (`pulumi preview --policy-pack policies`). */
export const PACK_NAME = "platform-guard";

/**
 * Every policy of the pack. Plain data so tests and the offline renderer import it; only index.ts
 * constructs the PolicyPack (which starts a gRPC server). Every policy is wrapped by `failClosed`
 * (lib/unknown.ts): a guarded value unknown during preview is a mandatory violation, never "can't run".
 */
export const allPolicies: Policy[] = (
    [
        ...rdmaFabricPolicies,
        ...rdmaWorkloadPolicies,
        ...mooncakePolicies,
        ...dynamoPolicies,
        ...rdmaPlatformPolicies,
        ...gatewayPolicies,
        ...efaPolicies,
        ...visibilityPolicies,
        ...pdCompatPolicies,
        ...awsPolicies,
        ...edgeTlsPolicies,
        ...upstreamPolicies,
        ...rolloutPolicies,
        ...spokeSecretPolicies,
    ] as Policy[]
).map(failClosed);
