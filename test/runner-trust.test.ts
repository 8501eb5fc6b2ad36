// Trust between the edge and runners (docs/security.md), attacked end to end: an impostor holding
// the shared RUNNER_TOKEN (what a session could once read from the runner's environment) dialling
// another tenant's session link; runners with per-runner credentials lying about their tenants or
// reusing another runner's id; and a purged id created again (incarnations).
import WebSocket from "ws";
import { describe, expect, inject, it } from "vitest";
import { type Edge, secret, startEdge, startRunner } from "../scripts/stack.js";
import { mintRunnerCredential } from "../shared/runner-credential.js";
import { encodeOutput } from "../shared/protocol.js";
import { Api, TermClient, fetchOutput, line, onSharedStack, until, waitForRunners } from "./harness.js";

const suite = onSharedStack();
const { url, api: acme, cleanup } = suite;
const runnerToken = inject("runnerToken");
const BASH = { command: "/bin/bash", args: ["--norc", "--noprofile"] };

/** Dials a session link as an impostor would; resolves with the upgrade's status (101 if accepted). */
function dialLink(
  base: string,
  tenant: string,
  id: string,
  credential: string,
  options: { reader?: boolean; linkToken?: string; onOpen?: (ws: WebSocket) => void } = {},
): Promise<number> {
  const target = `${base.replace(/^http/, "ws")}/internal/sessions/${tenant}/${id}/link${options.reader ? "?role=reader" : ""}`;
  const headers: Record<string, string> = { authorization: `Bearer ${credential}`, "x-runner-id": "e2e-runner" };
  if (options.linkToken !== undefined) headers["x-link-token"] = options.linkToken;
  const ws = new WebSocket(target, { headers });
  return new Promise((resolve) => {
    ws.on("unexpected-response", (_req, res) => {
      resolve(res.statusCode ?? 0);
      ws.terminate();
    });
    ws.on("open", () => {
      options.onOpen?.(ws);
      resolve(101);
      setTimeout(() => ws.terminate(), 200);
    });
    ws.on("error", () => resolve(0));
  });
}

describe("session links", () => {
  it("refuses an impostor with RUNNER_TOKEN: looping link dials claiming `exited` change nothing", async () => {
    const s = await suite.session(BASH);
    const client = suite.connect(s.id);
    await client.opened;

    const statuses = new Set<number>();
    const lies = (ws: WebSocket) => {
      ws.send(JSON.stringify({ type: "exited", exitCode: 0, signal: null }));
      ws.send(encodeOutput(0, Buffer.from("FORGED OUTPUT\r\n")));
      ws.send(JSON.stringify({ type: "read_end", id: 1, to: 0 }));
    };
    for (let round = 0; round < 10; round++) {
      const guesses = [undefined, "", "x".repeat(43), runnerToken];
      for (const linkToken of guesses) {
        statuses.add(await dialLink(url, "acme", s.id, runnerToken, { linkToken, onOpen: lies }));
        statuses.add(await dialLink(url, "acme", s.id, runnerToken, { linkToken, reader: true, onOpen: lies }));
      }
      // The real session keeps working between the attempts.
      client.send(`echo alive-$((${round}+100))\n`);
      await client.waitForOutput(line(`alive-${round + 100}`));
    }
    expect([...statuses]).toEqual([403]);
    expect(await acme.get(s.id)).toMatchObject({ status: "running" });
    expect(client.text).not.toContain("FORGED");
    expect(client.messages.filter((m) => m.type === "exit" || m.type === "gap")).toEqual([]);
    expect(client.offsetErrors).toEqual([]);
  });
});

describe("incarnations", () => {
  it("gives a purged id created again none of the old output, and answers 401 to its old tokens", async () => {
    const id = `reborn-${Date.now()}`;
    const first = await acme.create({ ...BASH, id });
    const viewer = (await acme.request("POST", `/v1/sessions/${id}/tokens`, { role: "viewer" })).body.token as string;
    const writer = (await acme.request("POST", `/v1/sessions/${id}/tokens`, { role: "writer" })).body.token as string;
    await acme.input(id, "echo first-life-$((40+2))\n");
    await until(async () => (await fetchOutput(acme, id, 0)).bytes.toString().includes("first-life-42"), 10_000, "output");
    expect((await new Api(url, viewer).request("GET", `/v1/sessions/${id}`)).status).toBe(200);
    expect((await acme.request("DELETE", `/v1/sessions/${id}?purge=true`)).status).toBe(200);

    const second = await suite.session({ ...BASH, id });
    expect(second.id).toBe(first.id);
    // The new session's log starts empty: nothing of the first life, from any offset.
    const replay = suite.connect(id, { query: "from=0" });
    await replay.opened;
    replay.send("echo second-life-$((40+3))\n");
    await replay.waitForOutput(line("second-life-43"));
    expect(replay.startOffset).toBe(0);
    expect(replay.text).not.toContain("first-life");
    expect((await fetchOutput(acme, id, 0)).bytes.toString()).not.toContain("first-life");

    // Old tokens name the first life: every route, stream and socket answers 401.
    for (const token of [viewer, writer]) {
      const api = new Api(url, token);
      expect((await api.request("GET", `/v1/sessions/${id}`)).status).toBe(401);
      expect((await api.request("GET", `/v1/sessions/${id}/output`)).status).toBe(401);
      expect((await api.request("POST", `/v1/sessions/${id}/input`, { data: "echo intruder\n" })).status).toBe(401);
      const sse = await fetch(`${url}/v1/sessions/${id}/stream`, { headers: { authorization: `Bearer ${token}` } });
      expect(sse.status).toBe(401);
      await sse.body?.cancel();
      const ws = new TermClient(url, id, token, { query: `token=${token}` });
      expect(await ws.waitForClose()).toBe(4001);
    }
    // A token minted now works.
    const fresh = (await acme.request("POST", `/v1/sessions/${id}/tokens`, { role: "viewer" })).body.token as string;
    expect((await new Api(url, fresh).request("GET", `/v1/sessions/${id}`)).status).toBe(200);
  });
});

describe("per-runner credentials", () => {
  it("takes a runner's id and tenants from its credential: a lying runner never hosts another tenant, a second one with the id is refused", async () => {
    const runnerSecret = secret();
    const keys = { acme: "acme-cred-key", globex: "globex-cred-key" };
    // Stopped after the file, its runners first.
    const edge: Edge = cleanup.edge(
      await startEdge({
        apiKeys: `acme:${keys.acme},globex:${keys.globex}`,
        runnerToken: secret(),
        runnerSecret,
      }),
    );
    const credential = await mintRunnerCredential(runnerSecret, { runnerId: "globex-only", tenants: ["globex"] });
    // It claims acme (RUNNER_TENANTS) and another id (RUNNER_ID): the credential decides.
    cleanup.runner(
      startRunner({
        brokerUrl: edge.url,
        runnerToken: credential,
        runnerId: "acme-runner",
        env: { RUNNER_TENANTS: "acme" },
      }),
    );
    await waitForRunners(edge.url, credential, 1);
    const runnersListed = async () =>
      (
        (await (
          await fetch(`${edge.url}/internal/runners`, { headers: { authorization: `Bearer ${credential}` } })
        ).json()) as { runners: { runnerId: string }[] }
      ).runners;
    const listed = { runners: await runnersListed() };
    expect(listed.runners.map((r) => r.runnerId)).toEqual(["globex-only"]);

    const acmeApi = new Api(edge.url, keys.acme);
    const globexApi = new Api(edge.url, keys.globex);
    const refused = await acmeApi.request("POST", "/v1/sessions", BASH);
    expect(refused.status).toBe(503);
    expect(refused.body.error.code).toBe("NO_RUNNER");
    const hosted = await globexApi.create(BASH);
    expect(hosted.status).toBe("running");

    // With the credential, acme's links are out of reach even with the right path.
    expect(await dialLink(edge.url, "acme", "anything", credential)).toBe(404);

    // The tenant bound's trim report (POST .../retained) is held to the same rules: no runner
    // credential, an API key, or another tenant's path are refused, and only the session's
    // current incarnation moves its retainedFrom (never past its offset).
    const report = (tenant: string, id: string, body: unknown, credentialUsed?: string) =>
      fetch(`${edge.url}/internal/sessions/${tenant}/${id}/retained`, {
        method: "POST",
        headers: { "content-type": "application/json", ...(credentialUsed ? { authorization: `Bearer ${credentialUsed}` } : {}) },
        body: JSON.stringify(body),
      });
    const token = await globexApi.request<{ token: string }>("POST", `/v1/sessions/${hosted.id}/tokens`, { role: "viewer" });
    const incarnation = JSON.parse(Buffer.from(token.body.token.split(".")[1], "base64url").toString()).inc as string;
    // The whole prompt: bash writes `\e[?2004h` and its prompt apart, and nothing more comes
    // until it is typed into, so the offset stays put while the reports below run.
    const offset = await until(async () => {
      const at = (await globexApi.get(hosted.id)).offset;
      if (at <= 1) return undefined;
      return (await globexApi.outputRange(hosted.id, 0, at)).toString("utf8").endsWith("$ ") ? at : undefined;
    }, 10_000, "the prompt");
    expect((await report("globex", hosted.id, { incarnation, from: 1 })).status).toBe(401);
    expect((await report("globex", hosted.id, { incarnation, from: 1 }, keys.globex)).status).toBe(401);
    expect((await report("acme", hosted.id, { incarnation, from: 1 }, credential)).status).toBe(404);
    expect((await report("globex", hosted.id, { incarnation, from: -1 }, credential)).status).toBe(400);
    expect((await report("globex", hosted.id, { incarnation: "another", from: 1 }, credential)).status).toBe(204);
    expect((await globexApi.get(hosted.id)).retainedFrom).toBe(0);
    expect((await report("globex", hosted.id, { incarnation, from: offset + 1000 }, credential)).status).toBe(204);
    expect((await globexApi.get(hosted.id)).retainedFrom).toBe(offset);

    // A second runner with the same credential (a copy, or a thief) is refused while the first lives.
    const twin = cleanup.runner(startRunner({ brokerUrl: edge.url, runnerToken: credential }));
    await until(() => twin.output().includes('"code":4009'), 20_000, "the twin to be refused");
    expect(await runnersListed()).toHaveLength(1);
    // The first runner still hosts its session.
    const client = new TermClient(edge.url, hosted.id, keys.globex);
    await client.opened;
    client.send("echo still-hosted-$((1+1))\n");
    await client.waitForOutput(line("still-hosted-2"));
    client.socket.terminate();
    await globexApi.destroy(hosted.id);
  });
});
