declare module "kinesalite" {
    import type { Server } from "node:http";
    interface KinesaliteOptions {
        createStreamMs?: number;
        deleteStreamMs?: number;
        updateStreamMs?: number;
        shardLimit?: number;
        path?: string;
        ssl?: boolean;
    }
    function kinesalite(opts?: KinesaliteOptions): Server;
    export = kinesalite;
}
