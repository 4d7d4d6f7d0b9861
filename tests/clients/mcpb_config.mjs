// What Claude Desktop starts for an installed MCP Bundle: the manifest's server.mcp_config with the user's
// choices (user_config) filled in, computed by @anthropic-ai/mcpb's own getMcpConfigForManifest.
// Usage: node mcpb_config.mjs EXTRACTED_DIR USER_CONFIG_JSON  -> prints {command, args, env} as JSON.
//        node mcpb_config.mjs EXTRACTED_DIR USER_CONFIG_JSON... -> one such line per user config, in order (one
//        Node start for several: it costs more CPU than the computing). Exits 1 if any is missing a required choice.
import { readFileSync } from "node:fs";
import { join, sep } from "node:path";
import { getMcpConfigForManifest } from "@anthropic-ai/mcpb";

const [dir, ...userConfigs] = process.argv.slice(2);
const manifest = JSON.parse(readFileSync(join(dir, "manifest.json"), "utf8"));
for (const userConfigJson of userConfigs) {
  const config = await getMcpConfigForManifest({
    manifest,
    extensionPath: dir,
    systemDirs: { HOME: process.env.HOME ?? "/", DESKTOP: "/", DOCUMENTS: "/", DOWNLOADS: "/" },
    userConfig: JSON.parse(userConfigJson),
    pathSeparator: sep,
  });
  if (config === undefined) {
    console.error("getMcpConfigForManifest: required configuration is missing");
    process.exit(1);
  }
  console.log(JSON.stringify(config));
}
