/**
 * Reads a Secrets Manager secret's string (the Lambda Node.js runtime provides the AWS SDK v3; it is external in
 * the bundle). An RDS-managed master secret is JSON `{username, password}`; the role secrets are plain passwords.
 * @throws Error when the secret has no SecretString
 */
export async function secretString(secretArn: string): Promise<string> {
    const sm = await import("@aws-sdk/client-secrets-manager");
    const out = await new sm.SecretsManagerClient({}).send(new sm.GetSecretValueCommand({ SecretId: secretArn }));
    if (!out.SecretString) throw new Error(`secret ${secretArn} has no SecretString`);
    return out.SecretString;
}
