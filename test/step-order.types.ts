/**
 * Step order carried by types, checked by `npm run typecheck` (this file is compiled, not run): metering needs the
 * {@link GatewayHandles} that only programs/gateway.ts `deployGateway` returns, so it cannot be wired before the
 * gateway. Each `@ts-expect-error` fails the type-check when the line it marks compiles, i.e. when a hand-made object
 * would be accepted in place of the gateway step's result.
 */
import type { deployGateway, GatewayHandles } from "../programs/gateway";
import type { MeteringDeployment } from "../programs/metering";

const fields = { redisUrlSecret: { name: "redis", key: "url" }, identity: { kind: "pod-identity" } } as const;

export function refusedWithoutTheGateway(d: Omit<MeteringDeployment, "gateway">): MeteringDeployment[] {
    // @ts-expect-error an object literal of the right shape is not GatewayHandles
    const literal: GatewayHandles = { redisUrlSecret: { name: "redis", key: "url" }, identity: { kind: "pod-identity" } };
    // @ts-expect-error nor is a spread of one
    const spread: MeteringDeployment = { ...d, gateway: { ...fields } };
    return [{ ...d, gateway: literal }, spread];
}

export function acceptedFromTheGateway(
    d: Omit<MeteringDeployment, "gateway">,
    gateway: ReturnType<typeof deployGateway>,
): MeteringDeployment {
    return { ...d, gateway: gateway.handles };
}
