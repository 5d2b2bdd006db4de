import { z } from "zod";
import { overlaps, parseCidr } from "./cidr";
import { DnsLabel } from "./endpoint";

/**
 * Stack-file schemas of an EKS spoke (`platform:cluster.provider: eks`). An EKS spoke differs from an
 * on-prem one in three keys: `platform:cluster` (region, pinned Kubernetes version, VPC), `platform:nodeGroups`
 * (managed node groups instead of named hosts) and `platform:backend` (EFA instead of InfiniBand rails).
 * Facts behind the defaults: (p5e/p5en, EFA, placement groups, Capacity Blocks).
 */

const CidrText = z.string().refine(
    (s) => {
        try {
            parseCidr(s);
            return true;
        } catch {
            return false;
        }
    },
    { message: "must be an IPv4 CIDR with no host bits set, e.g. 10.80.0.0/16" },
);

/** An AWS region name, e.g. `ap-southeast-1`. */
export const AwsRegion = z.string().regex(/^[a-z]{2}(-gov)?-[a-z]+-\d$/, "must be an AWS region like ap-southeast-1");
/** An availability zone name, e.g. `ap-southeast-1a`. */
export const AvailabilityZone = z.string().regex(/^[a-z]{2}(-gov)?-[a-z]+-\d[a-z]$/, "must be an availability zone like ap-southeast-1a");

/** GPU instance types an EKS spoke may use: HGX H200 with EFA. */
export const EKS_GPU_INSTANCE_TYPES = ["p5en.48xlarge", "p5e.48xlarge"] as const;
/** One of {@link EKS_GPU_INSTANCE_TYPES}. */
export type EksGpuInstanceType = (typeof EKS_GPU_INSTANCE_TYPES)[number];

/** Node profile preset describing an instance type (`p5en.48xlarge` -> `p5en-48xlarge`). */
export function profileNameFor(instanceType: string): string {
    return instanceType.replace(/\./g, "-");
}

/** The spoke's VPC: created here (subnets derived from `cidr`) or an existing one given by id. */
export const EksVpcSchema = z.discriminatedUnion("mode", [
    z
        .object({
            mode: z.literal("create"),
            /** VPC CIDR; private subnet i is the i-th quarter, public subnets are carved from the last quarter. */
            cidr: CidrText,
            /** Two or three AZs of the region (EKS needs subnets in at least two). */
            availabilityZones: z.array(AvailabilityZone).min(2).max(3),
            /**
             * Each AZ's subnets, by AZ name (`private`, `public` CIDRs inside `cidr`, none overlapping). Give them for a
             * VPC that must never move: without them subnet i is derived from the AZ's position in `availabilityZones`
             * (lib/eks.ts vpcSubnetPlan), so reordering or removing an AZ moves CIDRs and the replacement subnet collides
             * with the one still holding its block. Subnet resources are named by tier and AZ, never by position.
             */
            subnets: z.record(AvailabilityZone, z.object({ private: CidrText, public: CidrText }).strict()).optional(),
        })
        .strict()
        .superRefine((v, ctx) => {
            if (!v.subnets) return;
            const keys = Object.keys(v.subnets).sort(),
                azs = [...v.availabilityZones].sort();
            if (keys.join() !== azs.join())
                ctx.addIssue({
                    code: "custom",
                    path: ["subnets"],
                    message: `must name exactly the availabilityZones (${azs.join(", ")}), got ${keys.join(", ") || "none"}`,
                });
            let vpc: ReturnType<typeof parseCidr>;
            try {
                vpc = parseCidr(v.cidr);
            } catch {
                return;
            }
            const blocks: Array<[string, ReturnType<typeof parseCidr>]> = [];
            for (const [az, s] of Object.entries(v.subnets))
                for (const tier of ["private", "public"] as const) {
                    let c: ReturnType<typeof parseCidr>;
                    try {
                        c = parseCidr(s[tier]);
                    } catch {
                        continue;
                    }
                    if (c.prefix < vpc.prefix || !overlaps(c, vpc))
                        ctx.addIssue({
                            code: "custom",
                            path: ["subnets", az, tier],
                            message: `${s[tier]} is not inside the VPC's ${v.cidr}`,
                        });
                    for (const [other, o] of blocks)
                        if (overlaps(c, o))
                            ctx.addIssue({ code: "custom", path: ["subnets", az, tier], message: `${s[tier]} overlaps ${other}` });
                    blocks.push([`subnets.${az}.${tier}`, c]);
                }
        }),
    z
        .object({
            mode: z.literal("existing"),
            vpcId: z.string().regex(/^vpc-[0-9a-f]{8,17}$/, "must be a VPC id like vpc-0123456789abcdef0"),
            /** The VPC's CIDR, declared so the hub can check it against every other spoke's networks. */
            cidr: CidrText,
            /** Private subnets for nodes; at least two AZs. NAT/egress is the existing VPC's business. */
            privateSubnets: z
                .array(
                    z
                        .object({
                            id: z.string().regex(/^subnet-[0-9a-f]{8,17}$/, "must be a subnet id like subnet-0123456789abcdef0"),
                            availabilityZone: AvailabilityZone,
                            cidr: CidrText,
                        })
                        .strict(),
                )
                .min(2),
        })
        .strict(),
]);

/**
 * EKS versions a spoke may pin: in standard support and known to the pinned provider (@pulumi/aws 7.48.0 documents
 * `version: "1.35"` in eks/cluster.d.ts). Closed: a new version is added here once checked (its add-ons and the
 * AL2023 NVIDIA AMI), an old one removed before its standard support ends.
 */
export const EKS_STANDARD_SUPPORT_VERSIONS = ["1.35"] as const;

/** `platform:cluster` of an EKS spoke. */
export const EksClusterSchema = z
    .object({
        provider: z.literal("eks"),
        /** AWS region of the cluster; the spoke's aws.Provider uses it. */
        region: AwsRegion,
        /**
         * EKS Kubernetes version, pinned (`"1.35"`), one of {@link EKS_STANDARD_SUPPORT_VERSIONS}; changing it is a
         * control-plane upgrade. The cluster uses `upgradePolicy.supportType: STANDARD`: it never enters paid extended
         * support; bump the pin before its standard support ends (EKS then upgrades the control plane itself, and the next
         * `up` would ask for a downgrade EKS refuses).
         */
        kubernetesVersion: z
            .string()
            .regex(/^1\.\d{2}$/, 'must be a pinned EKS Kubernetes version like "1.35"')
            .refine((v) => (EKS_STANDARD_SUPPORT_VERSIONS as readonly string[]).includes(v), {
                message: `must be an EKS version in standard support the platform is checked with (${EKS_STANDARD_SUPPORT_VERSIONS.join(", ")}); older versions run in paid extended support`,
            }),
        /** Service CIDR (`kubernetesNetworkConfig.serviceIpv4Cidr`); pods get VPC addresses from the VPC CNI. */
        serviceCidr: CidrText.default("172.20.0.0/16"),
        /** Public API endpoint (CI previews from hosted runners need it); restricted to `publicAccessCidrs`. */
        endpointPublicAccess: z.boolean().default(true),
        publicAccessCidrs: z.array(CidrText).default([]),
        /**
         * Opt-in for a public API endpoint reachable from the whole internet (a `publicAccessCidrs` entry shorter than
         * /8, e.g. `0.0.0.0/0`, which is also EKS's own default when the list is empty). Default false: refused.
         */
        publicAccessFromAnywhere: z.boolean().default(false),
        vpc: EksVpcSchema,
        /**
         * IAM roles of the CI runners, given cluster access by EKS access entries (the cluster uses
         * `authenticationMode: API`, so only its creator is admin otherwise): `deployRoleArn` administers the
         * cluster (`pulumi up`), `previewRoleArn` reads it (`pulumi preview`).
         */
        access: z
            .object({
                deployRoleArn: z
                    .string()
                    .regex(/^arn:aws[a-z-]*:iam::\d{12}:role\/[\w+=,.@/-]+$/, "must be an IAM role ARN")
                    .optional(),
                previewRoleArn: z
                    .string()
                    .regex(/^arn:aws[a-z-]*:iam::\d{12}:role\/[\w+=,.@/-]+$/, "must be an IAM role ARN")
                    .optional(),
            })
            .strict()
            .default({}),
        /** Name of the default StorageClass the spoke creates (EBS gp3, encrypted); PVCs without a class use it. */
        defaultStorageClass: z
            .string()
            .regex(/^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$/)
            .default("gp3"),
    })
    .strict()
    .superRefine((c, ctx) => {
        c.publicAccessCidrs.forEach((cidr, i) => {
            let prefix = 32;
            try {
                prefix = parseCidr(cidr).prefix;
            } catch {
                return; /* reported by CidrText */
            }
            if (c.endpointPublicAccess && !c.publicAccessFromAnywhere && prefix < 8) {
                ctx.addIssue({
                    code: "custom",
                    path: ["publicAccessCidrs", i],
                    message: `${cidr} opens the cluster's Kubernetes API to the whole internet; list your runners' / VPN egress ranges instead, or, if that is really meant, set platform:cluster.publicAccessFromAnywhere: true`,
                });
            }
        });
        if (c.endpointPublicAccess && c.publicAccessCidrs.length === 0) {
            ctx.addIssue({
                code: "custom",
                path: ["publicAccessCidrs"],
                message: "a public API endpoint needs publicAccessCidrs (e.g. your VPN egress); or set endpointPublicAccess: false",
            });
        }
    });

/** Node counts of a managed node group (`scalingConfig`). */
export const ScalingSchema = z
    .object({
        desired: z.number().int().min(0),
        min: z.number().int().min(0),
        max: z.number().int().min(1),
    })
    .strict()
    .refine((s) => s.min <= s.desired && s.desired <= s.max, { message: "needs min <= desired <= max", path: ["desired"] });

const ReservationId = z.string().regex(/^cr-[0-9a-f]{8,17}$/, "must be a capacity reservation id like cr-0123456789abcdef0");

/**
 * How GPU capacity is bought. `odcr`: an On-Demand Capacity Reservation targeted by the launch template;
 * `capacity-block`: a Capacity Block for ML (launch template `instanceMarketOptions.marketType=capacity-block`,
 * node group `capacityType=CAPACITY_BLOCK`; EKS scales the group to 0 40 min before the block ends).
 * Both must be in the node group's availability zone.
 */
export const CapacitySchema = z.discriminatedUnion("type", [
    z.object({ type: z.literal("on-demand") }).strict(),
    z.object({ type: z.literal("odcr"), reservationId: ReservationId }).strict(),
    z.object({ type: z.literal("capacity-block"), reservationId: ReservationId }).strict(),
]);

/** One H200 node group: one instance type, one AZ, one cluster placement group. */
export const EksGpuNodeGroupSchema = z
    .object({
        name: DnsLabel,
        instanceType: z.enum(EKS_GPU_INSTANCE_TYPES).default("p5en.48xlarge"),
        /** Single AZ: a cluster placement group and a capacity reservation live in one AZ. */
        availabilityZone: AvailabilityZone,
        scaling: ScalingSchema,
        capacity: CapacitySchema.default({ type: "on-demand" }),
        /**
         * 2 MiB huge pages reserved at boot (`vm.nr_hugepages`). The EFA driver pre-allocates 5,128 of them;
         * workers request their share as `hugepages-2Mi`.
         */
        hugepages2Mi: z.number().int().min(0).max(262144).default(5128),
        /** Root volume in GiB (gp3). Model weights go to the instance-store RAID0 that nodeadm builds. */
        rootVolumeGiB: z.number().int().min(50).max(16384).default(200),
    })
    .strict();

/** The CPU node group for the gateway, auth, metering and the Mooncake master. */
export const EksCpuNodeGroupSchema = z
    .object({
        name: DnsLabel.default("system"),
        instanceTypes: z
            .array(z.string().regex(/^[a-z][a-z0-9-]*\.[a-z0-9-]+$/))
            .min(1)
            .default(["m7i.4xlarge"]),
        scaling: ScalingSchema,
        rootVolumeGiB: z.number().int().min(20).max(16384).default(100),
    })
    .strict();

/** `platform:nodeGroups` of an EKS spoke. */
export const EksNodeGroupsSchema = z
    .object({
        gpu: z.array(EksGpuNodeGroupSchema).min(1),
        cpu: EksCpuNodeGroupSchema,
    })
    .strict();

/** `platform:backend` of an EKS spoke: EFA through the EFA device plugin (the only mechanism we deploy). */
export const EfaBackendSchema = z
    .object({
        fabric: z.literal("efa"),
    })
    .strict();

/** `platform:cluster` of an EKS spoke as parsed ({@link EksClusterSchema}). */
export type EksCluster = z.infer<typeof EksClusterSchema>;
/** `platform:cluster.vpc` of an EKS spoke as parsed ({@link EksVpcSchema}): a VPC to create or an existing one. */
export type EksVpc = z.infer<typeof EksVpcSchema>;
/** One `platform:nodeGroups.gpu[]` entry as parsed ({@link EksGpuNodeGroupSchema}). */
export type EksGpuNodeGroup = z.infer<typeof EksGpuNodeGroupSchema>;
/** `platform:nodeGroups.cpu` as parsed ({@link EksCpuNodeGroupSchema}). */
export type EksCpuNodeGroup = z.infer<typeof EksCpuNodeGroupSchema>;
/** `platform:nodeGroups` of an EKS spoke as parsed ({@link EksNodeGroupsSchema}): GPU groups and the CPU group. */
export type EksNodeGroups = z.infer<typeof EksNodeGroupsSchema>;
/** How a GPU node group gets capacity, as parsed ({@link CapacitySchema}): On-Demand, an On-Demand Capacity Reservation or a Capacity Block. */
export type Capacity = z.infer<typeof CapacitySchema>;
