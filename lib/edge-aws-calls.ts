import type { AwsCall } from "../services/shared/aws-calls";

/**
 * Every AWS call cert-manager makes with the spoke's DNS-01 role (EKS, `tls.source: acme-dns01`), from
 * cert-manager/cert-manager pkg/issuer/acme/dns/route53/route53.go: UPSERT then DELETE of the challenge TXT record
 * (ChangeResourceRecordSets), polling the change (GetChange). `{hostedZoneId}` and `{challengeName}` are the spoke
 * file's zone and `_acme-challenge.<hostname>`; test/aws-simulate.test.ts evaluates each against the rendered role.
 */
export const CERT_MANAGER_AWS_CALLS: readonly AwsCall[] = [
    {
        source: "lib/edge.ts",
        action: "route53:ChangeResourceRecordSets",
        resource: "arn:aws:route53:::hostedzone/{hostedZoneId}",
        context: {
            "aws:SecureTransport": "true",
            "route53:ChangeResourceRecordSetsRecordTypes": ["TXT"],
            "route53:ChangeResourceRecordSetsNormalizedRecordNames": ["{challengeName}"],
            "route53:ChangeResourceRecordSetsActions": ["UPSERT"],
        },
        purpose: "publish the DNS-01 challenge",
    },
    {
        source: "lib/edge.ts",
        action: "route53:ChangeResourceRecordSets",
        resource: "arn:aws:route53:::hostedzone/{hostedZoneId}",
        context: {
            "aws:SecureTransport": "true",
            "route53:ChangeResourceRecordSetsRecordTypes": ["TXT"],
            "route53:ChangeResourceRecordSetsNormalizedRecordNames": ["{challengeName}"],
            "route53:ChangeResourceRecordSetsActions": ["DELETE"],
        },
        purpose: "clean the challenge up",
    },
    {
        source: "lib/edge.ts",
        action: "route53:GetChange",
        resource: "arn:aws:route53:::change/C0123456789ABCDEFGHIJ",
        context: { "aws:SecureTransport": "true" },
        purpose: "wait for the change to be INSYNC",
    },
];
