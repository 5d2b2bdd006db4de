import { SDK_TRANSPORT, type AwsCall } from "../shared/aws-calls";

/**
 * Every AWS call of the minting path (services/keys/mint.ts, run by `npm run mint-key` as a hub deployer:
 * `platform:hubDeployers`). `{tenantSecretArn}` is the tenant's key secret, `{credentialKeyArn}` the hub's credential
 * KMS key (components/hub/ApiKeys.ts); see services/shared/aws-calls.ts for the other placeholders.
 */
export const MINT_AWS_CALLS: readonly AwsCall[] = [
    {
        command: "DescribeSecretCommand",
        source: "services/keys/mint.ts",
        action: "secretsmanager:DescribeSecret",
        resource: "{tenantSecretArn}",
        context: { ...SDK_TRANSPORT },
        purpose: "the secret exists (the hub created it) and whether it has a value yet",
    },
    {
        command: "GetSecretValueCommand",
        source: "services/keys/mint.ts",
        action: "secretsmanager:GetSecretValue",
        resource: "{tenantSecretArn}",
        context: { ...SDK_TRANSPORT },
        purpose: "the tenant's other keys, kept when one is added or retired",
    },
    {
        source: "services/keys/mint.ts",
        action: "kms:Decrypt",
        resource: "{credentialKeyArn}",
        context: { ...SDK_TRANSPORT, "kms:ViaService": "secretsmanager.{region}.amazonaws.com" },
        purpose: "Secrets Manager decrypts the current value",
    },
    {
        command: "PutSecretValueCommand",
        source: "services/keys/mint.ts",
        action: "secretsmanager:PutSecretValue",
        resource: "{tenantSecretArn}",
        context: { ...SDK_TRANSPORT },
        purpose: "the new value: the tenant's keys with the minted one added (or the retired one removed)",
    },
    {
        source: "services/keys/mint.ts",
        action: "kms:GenerateDataKey",
        resource: "{credentialKeyArn}",
        context: { ...SDK_TRANSPORT, "kms:ViaService": "secretsmanager.{region}.amazonaws.com" },
        purpose: "Secrets Manager encrypts the new value under the credential key",
    },
];

/**
 * Every AWS call of minting and retiring on-prem spokes' source keys (services/keys/spoke-key.ts, run by
 * `npm run mint-key -- spoke-access-key` as a hub deployer). `{slotSecretArn}` is the key slot's secret,
 * `{slotUserArn}` its IAM user (components/hub/SpokeIdentity.ts), `{credentialKeyArn}` the KMS key of the secret.
 */
export const SPOKE_KEY_AWS_CALLS: readonly AwsCall[] = [
    {
        command: "DescribeSecretCommand",
        source: "services/keys/spoke-key.ts",
        action: "secretsmanager:DescribeSecret",
        resource: "{slotSecretArn}",
        context: { ...SDK_TRANSPORT },
        purpose: "the slot's secret exists (the hub created it) and is not scheduled for deletion",
    },
    {
        command: "ListAccessKeysCommand",
        source: "services/keys/spoke-key.ts",
        action: "iam:ListAccessKeys",
        resource: "{slotUserArn}",
        context: { ...SDK_TRANSPORT },
        purpose: "the slot user's keys: a slot holds one key (mint refuses a second; retire deletes them)",
    },
    {
        command: "CreateAccessKeyCommand",
        source: "services/keys/spoke-key.ts",
        action: "iam:CreateAccessKey",
        resource: "{slotUserArn}",
        context: { ...SDK_TRANSPORT },
        purpose: "the slot's source key, created outside Pulumi so no state holds it",
    },
    {
        command: "PutSecretValueCommand",
        source: "services/keys/spoke-key.ts",
        action: "secretsmanager:PutSecretValue",
        resource: "{slotSecretArn}",
        context: { ...SDK_TRANSPORT },
        purpose: "the pair {accessKeyId, secretAccessKey} into the slot's secret, the only place it is written",
    },
    {
        source: "services/keys/spoke-key.ts",
        action: "kms:GenerateDataKey",
        resource: "{credentialKeyArn}",
        context: { ...SDK_TRANSPORT, "kms:ViaService": "secretsmanager.{region}.amazonaws.com" },
        purpose: "Secrets Manager encrypts the new value under the credential key",
    },
    {
        command: "DeleteAccessKeyCommand",
        source: "services/keys/spoke-key.ts",
        action: "iam:DeleteAccessKey",
        resource: "{slotUserArn}",
        context: { ...SDK_TRANSPORT },
        purpose: "retiring the old slot's key (and undoing a mint whose secret could not be written)",
    },
];

/**
 * Every AWS call of installing an on-prem spoke's source key into its cluster (services/keys/source-key-install.ts,
 * run by `npm run mint-key -- install-source-key` as the spoke's deployer, `platform:spokeIdentities.<spoke>.deployerRoleArn`):
 * the read the spoke program made before the key left Pulumi. Placeholders as in {@link SPOKE_KEY_AWS_CALLS}.
 */
export const INSTALL_SOURCE_KEY_AWS_CALLS: readonly AwsCall[] = [
    {
        command: "GetSecretValueCommand",
        source: "services/keys/source-key-install.ts",
        action: "secretsmanager:GetSecretValue",
        resource: "{slotSecretArn}",
        context: { ...SDK_TRANSPORT },
        purpose: "the slot's key pair, applied as the spoke's Kubernetes Secret and held nowhere else",
    },
    {
        source: "services/keys/source-key-install.ts",
        action: "kms:Decrypt",
        resource: "{credentialKeyArn}",
        context: { ...SDK_TRANSPORT, "kms:ViaService": "secretsmanager.{region}.amazonaws.com" },
        purpose: "Secrets Manager decrypts the slot's value under the credential key",
    },
];
