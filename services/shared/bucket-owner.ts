import type { S3Client } from "@aws-sdk/client-s3";
import { z } from "zod";

/**
 * The account that must own a hub bucket our code reads or writes. S3 answers `403 Access Denied` to any request
 * whose `x-amz-expected-bucket-owner` header (SDK v3 input `ExpectedBucketOwner`) names another account than the
 * bucket's owner (Amazon S3 user guide, "Verifying bucket ownership with bucket owner condition"), so a hub bucket
 * deleted and its name taken by another account is never read from or written to. Run-time dependency-free (zod
 * only; the S3 client is a type import): service `config.ts` files use {@link BUCKET_OWNER}.
 */
export const BUCKET_OWNER = z.string().regex(/^\d{12}$/, "must be a 12-digit AWS account id (the hub's account)");

/** Name of the middleware {@link expectBucketOwner} adds (one per client). */
export const BUCKET_OWNER_MIDDLEWARE = "platformExpectedBucketOwner";

/**
 * Makes every command `client` sends carry `ExpectedBucketOwner: owner` (serialized as `x-amz-expected-bucket-owner`):
 * for a client that only ever talks to hub buckets (the auth service's policy bucket client), so no call of it can
 * drop the condition. A command that names another owner is refused before it is sent.
 * @returns `client`
 * @throws Error (from `send`) for a command whose `ExpectedBucketOwner` is another account
 */
export function expectBucketOwner<C extends Pick<S3Client, "middlewareStack">>(client: C, owner: string): C {
    const account = BUCKET_OWNER.parse(owner);
    client.middlewareStack.add(
        (next) => async (args) => {
            const input = args.input as { ExpectedBucketOwner?: string };
            if (input.ExpectedBucketOwner !== undefined && input.ExpectedBucketOwner !== account)
                throw new Error(
                    `S3 request expects bucket owner ${input.ExpectedBucketOwner}, this client serves ${account}'s buckets only`,
                );
            return next({ ...args, input: { ...args.input, ExpectedBucketOwner: account } });
        },
        { step: "initialize", name: BUCKET_OWNER_MIDDLEWARE, override: true },
    );
    return client;
}
