import * as aws from "@pulumi/aws";
import { parseCidr, subnet } from "../../../config/cidr";
import type { LedgerScope } from "./scope";

/** What the database and the Lambdas need of the ledger's network. */
export interface LedgerNetwork {
    subnets: aws.ec2.Subnet[];
    /** The ledger Lambdas' security group (database + endpoints only). */
    lambdaSg: aws.ec2.SecurityGroup;
    /** The database's security group (PostgreSQL from the Lambdas only). */
    dbSg: aws.ec2.SecurityGroup;
    /** Endpoints (Secrets Manager, CloudWatch metrics, S3): the Lambdas' only way out; they run after these exist. */
    endpoints: aws.ec2.VpcEndpoint[];
    /** The ledger VPC. */
    vpc: aws.ec2.Vpc;
    /** The S3 gateway endpoint (its policy: {@link s3EndpointPolicy}, set once the failure bucket exists). */
    s3Endpoint: aws.ec2.VpcEndpoint;
    /** The interface endpoints by service (their policies: {@link interfaceEndpointPolicies}, set once the secrets exist). */
    interfaceEndpoints: { secretsmanager: aws.ec2.VpcEndpoint; monitoring: aws.ec2.VpcEndpoint };
}

/**
 * Pure: the interface endpoints' policies, in place of the default (full access to the service, for any principal):
 * through the Secrets Manager endpoint only reading the ledger's own secrets (the master secret and the two role
 * passwords: services/reconciler/aws-calls.ts, services/usage-consumer/aws-calls.ts), through the CloudWatch endpoint
 * only publishing the reconciliation's metric namespace; both by principals of the hub's account
 * (`aws:PrincipalAccount`). Code in the VPC can then neither read another secret nor use CloudWatch to carry data out.
 * Source: docs.aws.amazon.com/vpc/latest/privatelink/vpc-endpoints-access.html (endpoint policies).
 */
export function interfaceEndpointPolicies(x: { secretArns: string[]; metricNamespace: string; accountId: string }) {
    const ownAccount = { "aws:PrincipalAccount": x.accountId };
    return {
        secretsmanager: {
            Version: "2012-10-17",
            Statement: [
                {
                    Sid: "LedgerSecretsOnly",
                    Effect: "Allow",
                    Principal: "*",
                    Action: ["secretsmanager:GetSecretValue"],
                    Resource: [...x.secretArns].sort(),
                    Condition: { StringEquals: ownAccount },
                },
            ],
        },
        monitoring: {
            Version: "2012-10-17",
            Statement: [
                {
                    Sid: "ReconciliationMetricOnly",
                    Effect: "Allow",
                    Principal: "*",
                    Action: ["cloudwatch:PutMetricData"],
                    Resource: "*",
                    Condition: { StringEquals: { ...ownAccount, "cloudwatch:namespace": x.metricNamespace } },
                },
            ],
        },
    };
}

/**
 * Pure: the S3 gateway endpoint's policy. The only S3 calls made from the ledger's VPC are the consumer keeping a
 * failed batch (services/usage-consumer/aws-calls.ts, `s3:PutObject` under `failed/` of the failure bucket) and the
 * ledger operations Lambda reading one back for a replay (services/reconciler/aws-calls.ts, `s3:GetObject` there, that
 * role only), by a principal of the hub's account (`aws:PrincipalAccount`); the default endpoint policy (full access to every bucket
 * of every account) would let code in the VPC copy data out to any bucket.
 * Source: docs.aws.amazon.com/vpc/latest/privatelink/vpc-endpoints-access.html (endpoint policies).
 */
export function s3EndpointPolicy(
    failedBatchBucketArn: string,
    failedPrefix: string,
    accountId: string,
    /** The roles that read failed batches back (the ledger operations Lambda's); nobody else reads through the VPC. */
    readerRoleArns: string[] = [],
): Record<string, unknown> {
    const read = readerRoleArns.length
        ? [
              {
                  Sid: "ReplayReadsFailedBatches",
                  Effect: "Allow",
                  Principal: "*",
                  Action: ["s3:GetObject"],
                  Resource: `${failedBatchBucketArn}/${failedPrefix}*`,
                  Condition: { StringEquals: { "aws:PrincipalAccount": accountId }, ArnEquals: { "aws:PrincipalArn": readerRoleArns } },
              },
          ]
        : [];
    return {
        Version: "2012-10-17",
        Statement: [
            ...read,
            {
                Sid: "KeepFailedBatchesOnly",
                Effect: "Allow",
                Principal: "*",
                Action: ["s3:PutObject"],
                Resource: `${failedBatchBucketArn}/${failedPrefix}*`,
                Condition: { StringEquals: { "aws:PrincipalAccount": accountId } },
            },
        ],
    };
}

/**
 * The ledger's network: a VPC with two private subnets (two /24s of `vpcCidr`, one per AZ) and no internet route;
 * Secrets Manager and CloudWatch metrics through interface endpoints.
 * @throws Error when `vpcCidr` is not an IPv4 CIDR or is smaller than /23 (config/cidr.ts `parseCidr`, `subnet`;
 *   config/metering.ts refuses both first)
 */
export function ledgerNetwork(scope: LedgerScope, args: { vpcCidr: string; availabilityZones: [string, string] }): LedgerNetwork {
    const block = parseCidr(args.vpcCidr);
    const vpc = new aws.ec2.Vpc(
        `${scope.name}-vpc`,
        { cidrBlock: args.vpcCidr, enableDnsHostnames: true, enableDnsSupport: true, tags: { ...scope.tags, Name: `${scope.name}-vpc` } },
        scope.parent,
    );
    const subnets = args.availabilityZones.map(
        (az, i) =>
            new aws.ec2.Subnet(
                `${scope.name}-private-${i}`,
                {
                    vpcId: vpc.id,
                    availabilityZone: az,
                    cidrBlock: subnet(block, 24, i).text,
                    mapPublicIpOnLaunch: false,
                    tags: { ...scope.tags, Name: `${scope.name}-private-${az}` },
                },
                scope.parent,
            ),
    );
    // One security group for the ledger's Lambdas (consumer, migrator, reconciliation): database + endpoints only.
    const lambdaSg = new aws.ec2.SecurityGroup(
        `${scope.name}-consumer-sg`,
        { vpcId: vpc.id, description: "usage consumer Lambda", tags: scope.tags },
        scope.parent,
    );
    const dbSg = new aws.ec2.SecurityGroup(
        `${scope.name}-db-sg`,
        { vpcId: vpc.id, description: "usage ledger database", tags: scope.tags },
        scope.parent,
    );
    const endpointSg = new aws.ec2.SecurityGroup(
        `${scope.name}-endpoint-sg`,
        { vpcId: vpc.id, description: "Secrets Manager endpoint", tags: scope.tags },
        scope.parent,
    );
    new aws.vpc.SecurityGroupIngressRule(
        `${scope.name}-db-from-consumer`,
        {
            securityGroupId: dbSg.id,
            referencedSecurityGroupId: lambdaSg.id,
            ipProtocol: "tcp",
            fromPort: 5432,
            toPort: 5432,
            description: "PostgreSQL from the consumer",
        },
        scope.parent,
    );
    new aws.vpc.SecurityGroupIngressRule(
        `${scope.name}-endpoint-from-consumer`,
        {
            securityGroupId: endpointSg.id,
            referencedSecurityGroupId: lambdaSg.id,
            ipProtocol: "tcp",
            fromPort: 443,
            toPort: 443,
            description: "HTTPS from the consumer",
        },
        scope.parent,
    );
    new aws.vpc.SecurityGroupEgressRule(
        `${scope.name}-consumer-to-db`,
        {
            securityGroupId: lambdaSg.id,
            referencedSecurityGroupId: dbSg.id,
            ipProtocol: "tcp",
            fromPort: 5432,
            toPort: 5432,
            description: "PostgreSQL",
        },
        scope.parent,
    );
    new aws.vpc.SecurityGroupEgressRule(
        `${scope.name}-consumer-to-endpoint`,
        {
            securityGroupId: lambdaSg.id,
            referencedSecurityGroupId: endpointSg.id,
            ipProtocol: "tcp",
            fromPort: 443,
            toPort: 443,
            description: "Secrets Manager",
        },
        scope.parent,
    );
    // Interface endpoints: Secrets Manager (every Lambda's password) and CloudWatch metrics (the reconciliation).
    const endpoints = (["secretsmanager", "monitoring"] as const).map(
        (svc) =>
            new aws.ec2.VpcEndpoint(
                `${scope.name}-${svc}`,
                {
                    vpcId: vpc.id,
                    serviceName: `com.amazonaws.${scope.region}.${svc}`,
                    vpcEndpointType: "Interface",
                    privateDnsEnabled: true,
                    subnetIds: subnets.map((s) => s.id),
                    securityGroupIds: [endpointSg.id],
                    tags: { ...scope.tags, Name: `${scope.name}-${svc}` },
                },
                scope.parent,
            ),
    );

    // S3 through a gateway endpoint on the VPC's route table: the consumer writes failed batches to the failure bucket
    // (services/usage-consumer/failed-batches.ts), HTTPS to S3's prefix list only.
    const s3 = new aws.ec2.VpcEndpoint(
        `${scope.name}-s3`,
        {
            vpcId: vpc.id,
            serviceName: `com.amazonaws.${scope.region}.s3`,
            vpcEndpointType: "Gateway",
            routeTableIds: [vpc.mainRouteTableId],
            tags: { ...scope.tags, Name: `${scope.name}-s3` },
        },
        scope.parent,
    );
    new aws.vpc.SecurityGroupEgressRule(
        `${scope.name}-consumer-to-s3`,
        {
            securityGroupId: lambdaSg.id,
            prefixListId: s3.prefixListId,
            ipProtocol: "tcp",
            fromPort: 443,
            toPort: 443,
            description: "S3 (failed usage batches)",
        },
        scope.parent,
    );

    return {
        subnets,
        lambdaSg,
        dbSg,
        endpoints: [...endpoints, s3],
        vpc,
        s3Endpoint: s3,
        interfaceEndpoints: { secretsmanager: endpoints[0], monitoring: endpoints[1] },
    };
}
