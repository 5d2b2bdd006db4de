import * as pulumi from "@pulumi/pulumi";
import { buildHub } from "./programs/hub";
import { loadStackConfig, stackFilePath } from "./programs/load";
import { buildSpoke } from "./programs/spoke";

/**
 * Stack entry point: reads `platform:role` and builds the hub or a spoke. Nothing else lives here.
 * Config is validated before any resource is created.
 */
export = async () => {
    const cfg = loadStackConfig();
    return cfg.role === "hub" ? buildHub(cfg.hub, pulumi.getStack()) : buildSpoke(cfg.spoke, stackFilePath());
};
