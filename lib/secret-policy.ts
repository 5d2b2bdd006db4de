/**
 * Every Secrets Manager action that changes a key secret's value, who may read it, or whether it exists: a new
 * SecretString (PutSecretValue, UpdateSecret), another current version (UpdateSecretVersionStage), another resource
 * policy; and deleting it (a forced delete has no recovery window) or undoing a pending delete, rotating it with a
 * function of the caller's choosing, copying it (and its key) to another region, or changing its tags (tag-based
 * access elsewhere). Source: the IAM service authorization reference for AWS Secrets Manager. The tenant key secrets
 * (components/hub/ApiKeys.ts) and on-prem source-key secrets (components/hub/SpokeIdentity.ts) deny them to everyone
 * but the hub's deployers.
 */
export const SECRET_CHANGE_ACTIONS = [
    "secretsmanager:PutSecretValue",
    "secretsmanager:UpdateSecret",
    "secretsmanager:UpdateSecretVersionStage",
    "secretsmanager:PutResourcePolicy",
    "secretsmanager:DeleteResourcePolicy",
    "secretsmanager:DeleteSecret",
    "secretsmanager:RestoreSecret",
    "secretsmanager:RotateSecret",
    "secretsmanager:CancelRotateSecret",
    "secretsmanager:ReplicateSecretToRegions",
    "secretsmanager:RemoveRegionsFromReplication",
    "secretsmanager:StopReplicationToReplica",
    "secretsmanager:TagResource",
    "secretsmanager:UntagResource",
] as const;
