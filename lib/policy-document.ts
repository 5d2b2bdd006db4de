/** An IAM, KMS or resource policy document (the subset the program writes). */
export interface PolicyDocument {
    Version: "2012-10-17";
    Statement: Array<{
        Sid: string;
        Effect: "Allow" | "Deny";
        Action: string[];
        /** Absent only in trust policies (the role itself is the resource). */
        Resource?: string | string[];
        Principal?: Record<string, string | string[]>;
        Condition?: Record<string, Record<string, string | string[]>>;
    }>;
}

/**
 * The statement every bucket policy of the hub begins with: any request to the bucket or its objects not made over TLS
 * (`aws:SecureTransport` false) is denied, whoever makes it (AWS IAM user guide, "AWS global condition context keys":
 * `aws:SecureTransport`).
 */
export function denyInsecureTransport(bucketArn: string) {
    return {
        Sid: "DenyInsecureTransport",
        Effect: "Deny" as const,
        Principal: "*",
        Action: "s3:*",
        Resource: [bucketArn, `${bucketArn}/*`],
        Condition: { Bool: { "aws:SecureTransport": "false" } },
    };
}
