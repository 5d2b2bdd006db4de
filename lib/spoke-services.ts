/**
 * What the spoke's own services share across components: pod labels and ports that other components select or
 * scrape (components/spoke/Observability.ts), and the AWS shared config/credentials files through which the
 * auth and metering services assume the SpokeIdentity role on-prem (components/spoke/AuthService.ts, Metering.ts).
 */
import { SOURCE_KEY_SECRET, SOURCE_KEY_SLOT_ANNOTATION } from "../services/shared/spoke-key-slot";

/** Labels of the auth service's pods (selector of its Deployment, Service, PDB and PodMonitor). */
export const AUTH_POD_LABELS = { "app.kubernetes.io/name": "platform-auth", "app.kubernetes.io/part-of": "agent-router" };
/** HTTP port of the metering service (`POST /v1/logs`, `/healthz`, `/readyz`, `/metrics`; services/metering/config.ts `METERING_PORT`). */
export const METERING_PORT = 8080;
/** Labels of the metering service's pods (selector of its StatefulSet, Services, NetworkPolicy and PodMonitor). */
export const METERING_POD_LABELS = { "app.kubernetes.io/name": "platform-metering", "app.kubernetes.io/part-of": "usage-metering" };

/** Mount path of the AWS shared config and credentials files. */
export const AWS_FILES_DIR = "/var/run/platform/aws";
/** Shared-config profile the auth service runs as: it assumes the SpokeIdentity role. */
export const AWS_PROFILE = "platform-spoke";
/**
 * Role session names of the auth and metering services (`role_session_name` in their shared config files). Each
 * service's SpokeIdentity role admits only its own on-prem (`sts:RoleSessionName`, components/hub/SpokeIdentity.ts).
 */
export const AWS_ROLE_SESSION_NAMES = { auth: "platform-auth", metering: "platform-metering" } as const;
// Shared with the install tool (services/keys/source-key-install.ts), which lives in services/ and imports no lib/.
export { AWS_SOURCE_PROFILE, awsCredentialsFile, SOURCE_KEY_SECRET } from "../services/shared/spoke-key-slot";

/** Pod-template annotation naming the source key slot the pods run on (services/shared/spoke-key-slot.ts SOURCE_KEY_SLOT_ANNOTATION). */
export function sourceKeyAnnotations(sourceKey: { slot: string } | undefined): { annotations?: Record<string, string> } {
    return sourceKey ? { annotations: { [SOURCE_KEY_SLOT_ANNOTATION]: sourceKey.slot } } : {};
}

/**
 * Pure: the projected volume mounted at {@link AWS_FILES_DIR} on-prem: `config` from the Pulumi-rendered Secret
 * `configSecret` (role, region; no credential) and `credentials` from {@link SOURCE_KEY_SECRET} (the operator-installed
 * source key). Both required: a pod without its key does not start (kubernetes/kubernetes@v1.33.0:pkg/volume/projected).
 */
export function awsFilesVolume<T>(configSecret: T) {
    return {
        defaultMode: 0o440,
        sources: [
            { secret: { name: configSecret, items: [{ key: "config", path: "config" }] } },
            { secret: { name: SOURCE_KEY_SECRET.name, items: [{ key: SOURCE_KEY_SECRET.key, path: "credentials" }] } },
        ],
    };
}

/**
 * The container-level security context every platform service container runs with (auth, metering, the counter
 * store, the collector): no privilege escalation, a read-only root filesystem, no Linux capabilities. A fresh copy
 * each call, since Pulumi inputs may be mutated by transformations.
 */
export function serviceContainerSecurity() {
    return { allowPrivilegeEscalation: false, readOnlyRootFilesystem: true, capabilities: { drop: ["ALL"] } };
}

/**
 * Pure: the pod-level settings every platform service pod shares (auth, metering): no service-account token mounted
 * (nothing here calls the Kubernetes API), the Pod Security Standards `restricted` context as `uid`
 * (kubernetes/website pod-security-standards.md: runAsNonRoot, RuntimeDefault seccomp), and replicas spread over nodes
 * so one node's loss takes one replica.
 * @param labels the pods' labels, the spread constraint's selector
 * @param uid the numeric UID (also GID and fsGroup) the image runs as: 10001 for the auth service
 *   (components/spoke/AuthService.ts), `METERING_UID` 65532 (distroless `nonroot`) for metering
 *   (components/spoke/Metering.ts)
 * @returns pod spec fields to spread into a pod template: `automountServiceAccountToken`, `securityContext`
 *   (`runAsUser`/`runAsGroup`/`fsGroup` = `uid`), `topologySpreadConstraints` (maxSkew 1 over
 *   `kubernetes.io/hostname`, ScheduleAnyway); a fresh object each call
 */
export function servicePodBasics(labels: Record<string, string>, uid: number) {
    return {
        automountServiceAccountToken: false,
        securityContext: { runAsNonRoot: true, runAsUser: uid, runAsGroup: uid, fsGroup: uid, seccompProfile: { type: "RuntimeDefault" } },
        topologySpreadConstraints: [
            {
                maxSkew: 1,
                topologyKey: "kubernetes.io/hostname",
                whenUnsatisfiable: "ScheduleAnyway",
                labelSelector: { matchLabels: labels },
            },
        ],
    };
}
