import { PolicyPack } from "@pulumi/policy";
import { allPolicies, PACK_NAME } from "./policies";

// The only file that constructs the pack. Mandatory by default: a violation fails `pulumi preview`/`up`.
new PolicyPack(PACK_NAME, { policies: allPolicies, enforcementLevel: "mandatory" });
