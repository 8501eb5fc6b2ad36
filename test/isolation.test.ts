// Trust boundaries around sessions (docs/security.md), attacked from inside sessions through the
// public API, on a runner that is root (as a production host's): a session reads none of the
// runner's secrets and is not root; one tenant's session can neither read another tenant's
// files nor signal its processes; every process a session starts ends with it, also those that
// left its terminal session (setsid, nohup), on DELETE, on exit, and after a runner crash.
import { join } from "node:path";
import { describe, expect, inject, it } from "vitest";
import { statFields } from "../runner/process/proc.js";
import { lookUpUser, tenantUserName } from "../runner/isolation/session-user.js";
import { type Edge, type ManagedProcess, secret, startEdge, startRunner } from "../scripts/stack.js";
import {
  Api,
  SHARED_WORKSPACE as WORKSPACE,
  SuiteCleanup,
  TermClient,
  alive,
  commandOf,
  onSharedStack,
  until,
  waitForRunners,
} from "./harness.js";

const suite = onSharedStack({ clients: "close" });
const { url, api: acme, globex } = suite;
const runnerToken = inject("runnerToken");
const runnerPid = inject("runnerPid");
/** The edge's grace between SIGHUP and the end of everything on DELETE (shared/session.ts). */
const KILL_GRACE_MS = 2000;

/**
 * A bash session of `api`'s tenant with a client attached to it. Sessions on the shared edge are
 * purged after the file (those on this file's own edge end with its runners).
 */
async function shell(api: Api, edgeUrl = url): Promise<{ id: string; pid: number; client: TermClient }> {
  const s = await api.create({ command: "/bin/bash", args: ["--norc", "--noprofile"] });
  if (api.url === url) suite.cleanup.session(api, s.id);
  const client = suite.cleanup.client(new TermClient(edgeUrl, s.id, api.key as string));
  await client.opened;
  return { id: s.id, pid: s.pid as number, client };
}

let marks = 0;

/**
 * What `command` prints in the session, exactly (lines joined with \n). It is typed between two
 * markers the shell computes, so that the echo of the typed line never matches them.
 */
async function run(client: TermClient, command: string, deadlineMs?: number): Promise<string> {
  const n = 1000 + ++marks;
  const begin = `@@${n}<\r\n`;
  const end = `@@${n}>\r\n`;
  client.send(`echo "@@$((${n}))<"; ${command}; echo "@@$((${n}))>"\n`);
  await client.waitForOutput(end, deadlineMs);
  const text = client.text;
  const from = text.lastIndexOf(begin) + begin.length;
  return text.slice(from, text.lastIndexOf(end)).replaceAll("\r\n", "\n");
}



/**
 * Starts, from the session, a `sleep 300` in a terminal session of its own (`setsid -f`) and a
 * `nohup sleep 300` in the background; their pids, once both are running.
 */
async function startEscapees(client: TermClient, shellPid: number): Promise<{ setsid: number; nohup: number }> {
  client.send(`setsid -f sh -c 'echo "setsid=$$"; exec sleep 300'; nohup sleep 300 >/dev/null 2>&1 & echo "nohup=$!"\n`);
  await client.waitForOutput(/setsid=\d+\r\n/);
  await client.waitForOutput(/nohup=\d+\r\n/);
  const setsid = Number(/setsid=(\d+)\r\n/.exec(client.text)?.[1]);
  const nohup = Number(/nohup=(\d+)\r\n/.exec(client.text)?.[1]);
  // Any still running `sleep 300` at the end gets SIGKILL (by this pid only).
  suite.cleanup.strayProcess(setsid, "sleep 300");
  suite.cleanup.strayProcess(nohup, "sleep 300");
  await until(() => commandOf(setsid) === "sleep 300" && commandOf(nohup) === "sleep 300", 5000, "both sleeps to run");
  // The setsid child has left the shell's terminal session; the nohup one has not.
  expect(statFields(setsid)?.[3]).toBe(String(setsid));
  expect(statFields(nohup)?.[3]).toBe(String(shellPid));
  return { setsid, nohup };
}

describe("sessions as their own users", () => {
  it("reads no runner secret from /proc (its parent's environ or any other) and does not run as root", async () => {
    const { client } = await shell(acme);
    const user = lookUpUser(tenantUserName("acme"));
    expect(user).not.toBeNull();
    const { name, uid, gid } = user as NonNullable<typeof user>;
    expect(uid).toBeGreaterThan(0);

    expect(await run(client, "id; id -u")).toBe(`uid=${uid}(${name}) gid=${gid}(${name}) groups=${gid}(${name})\n${uid}\n`);
    expect(await run(client, 'echo "$HOME $USER $LOGNAME $SHELL"; pwd')).toBe(
      `${join(WORKSPACE, "acme")} ${name} ${name} /bin/bash\n${join(WORKSPACE, "acme")}\n`,
    );
    // Its terminal is its own, and no one else's to write to.
    expect(await run(client, 'stat -c "%U %a" "$(tty)"')).toBe(`${name} 600\n`);

    // The runner is the session's parent; its environment holds RUNNER_TOKEN and REDIS_URL.
    expect(await run(client, "echo $PPID; cat /proc/$PPID/environ")).toBe(
      `${runnerPid}\ncat: /proc/${runnerPid}/environ: Permission denied\n`,
    );

    // Every environment the session can read: the token (typed in base64, so that only a
    // process's environment can show it in clear), and the runner's variables by name.
    const walk = `for f in /proc/[0-9]*/environ; do tr '\\0' '\\n' 2>/dev/null < "$f"; done`;
    const encoded = Buffer.from(runnerToken).toString("base64");
    expect(
      await run(
        client,
        `t=$(echo ${encoded} | base64 -d); printf '%s' "$t" | wc -c; ` +
          `${walk} | grep -a -c -F -e "$t" -e RUNNER_TOKEN= -e REDIS_URL= -e BROKER_URL=`,
      ),
    ).toBe(`${runnerToken.length}\n0\n`);
    // The walk does read what is the session's own: its shell's environment.
    const own = Number((await run(client, `${walk} | grep -a -c -x "HOME=$HOME"`)).trim());
    expect(own).toBeGreaterThan(0);
    expect(client.text).not.toContain(runnerToken);
  });

  it("keeps one tenant out of another's files and processes", async () => {
    const g = await shell(globex);
    const globexUser = tenantUserName("globex");
    const home = join(WORKSPACE, "globex");
    expect(
      await run(g.client, `rm -f secret.txt; (umask 077; echo "globex-secret-$((6*7))" > secret.txt); stat -c '%a %U' secret.txt; cat secret.txt; echo $$; pwd`),
    ).toBe(`600 ${globexUser}\nglobex-secret-42\n${g.pid}\n${home}\n`);
    expect(alive(g.pid)).toBe(true);

    const a = await shell(acme);
    expect(await run(a.client, `cat ${home}/secret.txt; echo rc=$?`)).toBe(
      `cat: ${home}/secret.txt: Permission denied\nrc=1\n`,
    );
    expect(await run(a.client, `ls ${home}; echo rc=$?`)).toBe(`ls: cannot open directory '${home}': Permission denied\nrc=2\n`);
    expect(await run(a.client, `kill -0 ${g.pid}; echo rc=$?`)).toBe(`bash: kill: (${g.pid}) - Operation not permitted\nrc=1\n`);
    expect(await run(a.client, `kill -KILL ${g.pid}; echo rc=$?`)).toBe(`bash: kill: (${g.pid}) - Operation not permitted\nrc=1\n`);
    expect(alive(g.pid)).toBe(true);
    expect(await run(g.client, "echo globex-still-$((1+1))")).toBe("globex-still-2\n");
    expect(a.client.text).not.toContain("globex-secret-42");
  });
});

describe("processes end with their session", () => {
  it("ends setsid and nohup children within the grace after DELETE", async () => {
    const { id, pid, client } = await shell(acme);
    const { setsid, nohup } = await startEscapees(client, pid);

    const deletedAt = performance.now();
    const deleted = await acme.request("DELETE", `/v1/sessions/${id}`);
    expect(deleted.status).toBe(200);
    expect(deleted.body).toMatchObject({ status: "exited", signal: "SIGHUP" });
    await until(() => !alive(setsid) && !alive(nohup), KILL_GRACE_MS + 1000, "the session's children to end");
    const goneMs = performance.now() - deletedAt;
    console.info(`isolation: setsid and nohup children gone ${Math.round(goneMs)} ms after DELETE`);
    expect(goneMs).toBeLessThan(KILL_GRACE_MS + 1000);
    expect(alive(pid)).toBe(false);
  });

  it("ends setsid and nohup children when the session's shell exits by itself", async () => {
    const { id, pid, client } = await shell(acme);
    const { setsid, nohup } = await startEscapees(client, pid);

    const exitAt = performance.now();
    client.send("exit 3\n");
    await until(async () => (await acme.get(id)).status === "exited", 10_000, "the session to exit");
    expect(await acme.get(id)).toMatchObject({ status: "exited", exitCode: 3 });
    await until(() => !alive(setsid) && !alive(nohup), KILL_GRACE_MS + 1000, "the session's children to end");
    console.info(`isolation: setsid and nohup children gone ${Math.round(performance.now() - exitAt)} ms after exit`);
  });
});

describe("a runner of its own", () => {
  const key = "isolation-acme-key";
  const token = secret();
  // This block's own edge, runners and workspace, stopped and removed after it.
  const own = new SuiteCleanup();
  const workspace = own.tempFolder("ptybroker-isolation-");
  let edge: Edge | undefined;

  async function ownEdge(): Promise<Edge> {
    edge ??= own.edge(await startEdge({ apiKeys: `acme:${key}`, runnerToken: token }));
    return edge;
  }

  function runner(env: Record<string, string>, brokerUrl: string): ManagedProcess {
    const started = own.runner(startRunner({ brokerUrl, runnerToken: token, env: { RUNNER_WORKSPACE: workspace, ...env } }));
    void started.exited.then(() => own.runners.delete(started));
    return started;
  }

  it("ends what a SIGKILLed runner's session left when the runner starts again", async () => {
    const { url: edgeUrl } = await ownEdge();
    const api = new Api(edgeUrl, key);
    const first = runner({ RUNNER_ID: "isolation-restarted" }, edgeUrl);
    await waitForRunners(edgeUrl, token, 1);
    const { pid, client } = await shell(api, edgeUrl);
    const { setsid, nohup } = await startEscapees(client, pid);

    first.kill("SIGKILL");
    await first.exited;
    // Nothing ended them: the setsid one is in no terminal session the PTY's close reaches.
    expect(alive(setsid)).toBe(true);

    const again = runner({ RUNNER_ID: "isolation-restarted" }, edgeUrl);
    const restartedAt = performance.now();
    await until(() => !alive(setsid) && !alive(nohup), 15_000, "the dead run's leftovers to end").catch((error: Error) => {
      throw new Error(`${error.message}\nrunner output:\n${again.output()}`);
    });
    console.info(`isolation: leftovers of the SIGKILLed run gone ${Math.round(performance.now() - restartedAt)} ms after the restart`);
    await again.stop();
    expect(await again.exited).toBe(0);
  });

  it("runs every session as RUNNER_SESSION_USER, and refuses root", async () => {
    const refused = runner({ RUNNER_SESSION_USER: "root" }, "http://127.0.0.1:9");
    let code: number | null | undefined;
    void refused.exited.then((c) => (code = c));
    await until(() => code !== undefined, 15_000, "the runner to refuse to start");
    expect(code).toBe(1);
    expect(refused.output()).toContain("RUNNER_SESSION_USER=root: sessions may not run as root");

    const { url: edgeUrl } = await ownEdge();
    const api = new Api(edgeUrl, key);
    const named = runner({ RUNNER_SESSION_USER: "nobody", RUNNER_ID: "isolation-nobody" }, edgeUrl);
    // The only runner of this edge, so the session is placed on it.
    await until(
      async () => {
        const res = await fetch(`${edgeUrl}/internal/runners`, { headers: { authorization: `Bearer ${token}` } });
        const body = (await res.json()) as { runners: { runnerId: string }[] };
        return body.runners.map((r) => r.runnerId).join() === "isolation-nobody";
      },
      30_000,
      "the named-user runner alone",
    );
    const { client } = await shell(api, edgeUrl);
    const nobody = lookUpUser("nobody") as NonNullable<ReturnType<typeof lookUpUser>>;
    expect(await run(client, 'id -un; id -u; echo "$HOME"')).toBe(`nobody\n${nobody.uid}\n${join(workspace, "acme")}\n`);
    await named.stop();
  });
});
