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
