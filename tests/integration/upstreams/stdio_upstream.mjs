// A small MCP server over stdio (MCP basic/transports §stdio: one JSON-RPC message per line),
// with no dependencies, run by Gatehouse as a stdio upstream in the integration tests. Its tools
// show what the child process sees: its environment's names, its working folder, its pid.
//
// Tools: echo (read-only; the message "link" is answered with a link to the memo and the memo
// embedded), whoami (read-only: env names, cwd, pid), exit (read-only: answers,
// then the process exits with status 3; with {"grow": true} the next process started in the same
// folder also lists the tool grown), wipe (destructive: counts its calls); with WITH_SLOW=1
// in its environment also slow (read-only: answers "late" after 3 s); with WITH_GROW=1 also grow
// (read-only: adds the tool grown and the prompt bye, then sends both list_changed
// notifications). Prompts: greet (a text,
// then a link to the memo).
// Resources: memo://notes/first; template memo://notes/{name}. Completions: greet's who (Ada,
// Alan, Grace), the template's name (first).
import { existsSync, writeFileSync } from "node:fs";
import { createInterface } from "node:readline";

const send = (message) => process.stdout.write(JSON.stringify(message) + "\n");
const readOnly = { readOnlyHint: true, destructiveHint: false };
const schema = { type: "object", properties: { message: { type: "string" } } };
const tools = [
  { name: "echo", description: "Echoes the message.", inputSchema: schema, annotations: readOnly },
  { name: "whoami", description: "Shows the process's environment names, folder and pid.", inputSchema: { type: "object" }, annotations: readOnly },
  { name: "exit", description: "Answers, then ends the process.", inputSchema: { type: "object" }, annotations: readOnly },
  { name: "wipe", description: "Wipes the memos.", inputSchema: schema, annotations: { readOnlyHint: false, destructiveHint: true } },
];
if (process.env.WITH_SLOW === "1") {
  tools.push({ name: "slow", description: "Answers after 3 s.", inputSchema: { type: "object" }, annotations: readOnly });
}
if (process.env.WITH_GROW === "1") {
  tools.push({ name: "grow", description: "Adds the tool grown and the prompt bye, and says so.", inputSchema: { type: "object" }, annotations: readOnly });
}
if (existsSync("grown")) {
  tools.push({ name: "grown", description: "Listed by a process started after exit with grow.", inputSchema: { type: "object" }, annotations: readOnly });
}
let wipes = 0;
const prompts = [
  { name: "greet", description: "Greets someone.", arguments: [{ name: "who", required: true }] },
];
const resources = [
  { uri: "memo://notes/first", name: "first", mimeType: "text/plain", description: "The first memo." },
];
const text = (t) => ({ content: [{ type: "text", text: t }], isError: false });

function answer(request) {
  const params = request.params ?? {};
  switch (request.method) {
    case "initialize":
      return {
        protocolVersion: params.protocolVersion ?? "2025-06-18",
        capabilities: { tools: { listChanged: true }, prompts: { listChanged: true }, resources: {}, completions: {} },
        serverInfo: { name: "stdio-test-upstream", version: "1.0.0" },
      };
    case "ping":
      return {};
    case "tools/list":
      return { tools };
    case "prompts/list":
      return { prompts };
    case "prompts/get":
      if (params.name !== "greet") throw { code: -32602, message: "no such prompt" };
      return {
        messages: [
          { role: "user", content: { type: "text", text: `Say hello to ${params.arguments?.who}.` } },
          { role: "user", content: { type: "resource_link", uri: "memo://notes/first", name: "first" } },
        ],
      };
    case "resources/list":
      return { resources };
    case "resources/templates/list":
      return { resourceTemplates: [{ uriTemplate: "memo://notes/{name}", name: "memo" }] };
    case "completion/complete": {
      // Values that start with what was typed (MCP server/utilities/completion).
      const ref = params.ref ?? {};
      const from = (values) => ({
        completion: { values: values.filter((v) => v.toLowerCase().startsWith(String(params.argument?.value ?? "").toLowerCase())) },
      });
      if (ref.type === "ref/prompt" && ref.name === "greet" && params.argument?.name === "who") return from(["Ada", "Alan", "Grace"]);
      if (ref.type === "ref/resource" && ref.uri === "memo://notes/{name}" && params.argument?.name === "name") return from(["first"]);
      throw { code: -32602, message: `nothing to complete for ${JSON.stringify(ref)}` };
    }
    case "resources/read":
      if (params.uri !== "memo://notes/first") throw { code: -32002, message: "no such resource" };
      return { contents: [{ uri: params.uri, mimeType: "text/plain", text: "remember the milk" }] };
    case "tools/call": {
      const args = params.arguments ?? {};
      switch (params.name) {
        case "echo":
          if (args.message === "link") {
            // The memo, linked and embedded (MCP server/tools §Resource Links, §Embedded Resources).
            return {
              content: [
                { type: "text", text: "Echo: link" },
                { type: "resource_link", uri: "memo://notes/first", name: "first", mimeType: "text/plain" },
                { type: "resource", resource: { uri: "memo://notes/first", mimeType: "text/plain", text: "remember the milk" } },
              ],
            };
          }
          return text(`Echo: ${args.message ?? ""}`);
        case "whoami":
          return text(JSON.stringify({ env: Object.keys(process.env).sort(), cwd: process.cwd(), pid: process.pid }));
        case "wipe":
          wipes += 1;
          return text(`wiped ${args.message ?? ""} (${wipes})`);
        case "grow":
          if (!tools.some((t) => t.name === "grown")) {
            tools.push({ name: "grown", description: "Grown by grow.", inputSchema: { type: "object" }, annotations: readOnly });
            prompts.push({ name: "bye", description: "Says goodbye." });
          }
          setTimeout(() => {
            send({ jsonrpc: "2.0", method: "notifications/tools/list_changed" });
            send({ jsonrpc: "2.0", method: "notifications/prompts/list_changed" });
          }, 10);
          return text("grown");
        case "exit":
          // Asked to, the next process started in this folder lists one tool more.
          if (args.grow === true) writeFileSync("grown", "");
          setTimeout(() => process.exit(3), 50);
          return text("bye");
        default:
          throw { code: -32602, message: `no tool ${params.name}` };
      }
    }
    default:
      throw { code: -32601, message: `method not found: ${request.method}` };
  }
}

createInterface({ input: process.stdin }).on("line", (line) => {
  let request;
  try {
    request = JSON.parse(line);
  } catch {
    return;
  }
  if (request.id === undefined) return; // a notification
  if (request.method === "tools/call" && request.params?.name === "slow") {
    setTimeout(() => send({ jsonrpc: "2.0", id: request.id, result: text("late") }), 3000);
    return;
  }
  try {
    send({ jsonrpc: "2.0", id: request.id, result: answer(request) });
  } catch (e) {
    send({ jsonrpc: "2.0", id: request.id, error: { code: e.code ?? -32603, message: e.message ?? String(e) } });
  }
});
process.stderr.write("stdio test upstream ready\n");
