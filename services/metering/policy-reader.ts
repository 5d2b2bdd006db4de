import { GetObjectCommand, type S3Client } from "@aws-sdk/client-s3";

/**
 * The metering service's reads of the hub's policy bucket (pointer and signed bundle, for the token windows of
 * services/metering/limits.ts `BundleWindows`): each `GetObject` carries `ExpectedBucketOwner: owner`, the hub's
 * account (`METERING_POLICY_BUCKET_OWNER`), so S3 refuses it when the bucket of that name belongs to another account.
 * @returns a reader of one object's text by key; it throws the S3 client's error
 */
export function policyObjectReader(s3: Pick<S3Client, "send">, bucket: string, owner: string): (key: string) => Promise<string> {
    return async (key) => {
        const o = await s3.send(new GetObjectCommand({ Bucket: bucket, Key: key, ExpectedBucketOwner: owner }));
        return o.Body!.transformToString("utf8");
    };
}
