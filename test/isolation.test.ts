// Trust boundaries around sessions (docs/security.md), attacked from inside sessions through the
// public API, on a runner that is root (as a production host's), each session in its sandbox
// (RUNNER_SANDBOX=bwrap, the default): a session reads none of the runner's secrets (the runner
// is not even in its process list) and is not root; one tenant's session can neither read another
// tenant's files (not mounted: "No such file or directory") nor signal its processes (not in its
// pid namespace: "No such process"); every process a session starts ends with it, also those that
// left its terminal session (setsid, nohup), on DELETE, on exit, and when its runner is SIGKILLed
// (with the runner, in a sandbox; at the runner's next start, without one).
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
  hostPid,
  onSharedStack,
  until,
  shellOutput,
} from "./harness.js";

const suite = onSharedStack({ clients: "close" });
const { url, api: acme, globex } = suite;
const runnerToken = inject("runnerToken");
const runnerPid = inject("runnerPid");
/** The edge's grace between SIGHUP and the end of everything on DELETE (shared/session.ts). */
const KILL_GRACE_MS = 2000;
/** A sandboxed session's workspace and home, inside (runner/isolation/sandbox.ts). */
const SANDBOX_HOME = "/workspace";
/** The session's command inside its sandbox's pid namespace: bubblewrap's init is 1. */
const INNER_SHELL_PID = 2;

/**
 * A bash session of `api`'s tenant with a client attached to it; `pid` is the session's as the API
 * reports it (its first process, on the host). Sessions on the shared edge are purged after the
 * file (those on this file's own edge end with its runners).
 */
async function shell(api: Api, edgeUrl = url): Promise<{ id: string; pid: number; client: TermClient }> {
  const s = await api.create({ command: "/bin/bash", args: ["--norc", "--noprofile"] });
  if (api.url === url) suite.cleanup.session(api, s.id);
  const client = suite.cleanup.client(new TermClient(edgeUrl, s.id, api.key as string));
  await client.opened;
  return { id: s.id, pid: s.pid as number, client };
}

/** What `command` prints in the session (test/term-client.ts, shellOutput). */
const run = shellOutput;



/**
 * Starts, from the session whose pid is `sessionPid`, a `sleep 300` in a terminal session of its
 * own (`setsid -f`) and a `nohup sleep 300` in the background; their host pids, once both are
 * running. `sandboxed`: the shell prints pids of its sandbox's numbering, mapped to the host's.
 */
async function startEscapees(client: TermClient, sessionPid: number, sandboxed = true): Promise<{ setsid: number; nohup: number }> {
  client.send(`setsid -f sh -c 'echo "setsid=$$"; exec sleep 300'; nohup sleep 300 >/dev/null 2>&1 & echo "nohup=$!"\n`);
  await client.waitForOutput(/setsid=\d+\r\n/);
  await client.waitForOutput(/nohup=\d+\r\n/);
  const printed = [/setsid=(\d+)\r\n/, /nohup=(\d+)\r\n/].map((pattern) => Number(pattern.exec(client.text)?.[1]));
  const [setsid, nohup] = printed.map((pid) => (sandboxed ? (hostPid(sessionPid, pid) ?? 0) : pid));
  expect(setsid).toBeGreaterThan(0);
  expect(nohup).toBeGreaterThan(0);
  // Any still running `sleep 300` at the end gets SIGKILL (by this pid only).
  suite.cleanup.strayProcess(setsid, "sleep 300");
  suite.cleanup.strayProcess(nohup, "sleep 300");
  await until(() => commandOf(setsid) === "sleep 300" && commandOf(nohup) === "sleep 300", 5000, "both sleeps to run");
  // The setsid child has left the shell's terminal session (led by the session's first process);
  // the nohup one has not.
  expect(statFields(setsid)?.[3]).toBe(String(setsid));
  expect(statFields(nohup)?.[3]).toBe(String(sessionPid));
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
    expect(await run(client, 'echo "$HOME $USER $LOGNAME $SHELL"; pwd')).toBe(`${SANDBOX_HOME} ${name} ${name} /bin/bash\n${SANDBOX_HOME}\n`);
    // Its terminal (bubblewrap binds it on /dev/console) is its own, and no one else's to write to.
    expect(await run(client, 'tty; stat -c "%U %a" "$(tty)"')).toBe(`/dev/console\n${name} 600\n`);

    // The runner's environment holds RUNNER_TOKEN and REDIS_URL. The shell's parent is its
    // sandbox's init (bubblewrap, root's: not readable), and the runner is not in the session's
    // pid namespace at all.
    expect(await run(client, `echo $$ $PPID; cat /proc/$PPID/environ; cat /proc/${runnerPid}/environ`)).toBe(
      `${INNER_SHELL_PID} 1\ncat: /proc/1/environ: Permission denied\ncat: /proc/${runnerPid}/environ: No such file or directory\n`,
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
    expect(
      await run(g.client, `rm -f secret.txt; (umask 077; echo "globex-secret-$((6*7))" > secret.txt); stat -c '%a %U' secret.txt; cat secret.txt; echo $$; pwd`),
    ).toBe(`600 ${globexUser}\nglobex-secret-42\n${INNER_SHELL_PID}\n${SANDBOX_HOME}\n`);
    // globex's shell as the host numbers it: what an attacker who learnt it would try.
    const globexShell = hostPid(g.pid, INNER_SHELL_PID) as number;
    expect(commandOf(globexShell)).toBe("/bin/bash --norc --noprofile");

    // globex's folder, by its path on the host and through its shell's /proc entry: nothing of
    // globex is mounted in acme's sandbox, and globex's shell is not in acme's pid namespace.
    const home = join(WORKSPACE, "globex");
    const a = await shell(acme);
    expect(await run(a.client, `cat ${home}/secret.txt; echo rc=$?`)).toBe(`cat: ${home}/secret.txt: No such file or directory\nrc=1\n`);
    expect(await run(a.client, `ls ${home}; echo rc=$?`)).toBe(`ls: cannot access '${home}': No such file or directory\nrc=2\n`);
    expect(await run(a.client, `cat /proc/${globexShell}/root${SANDBOX_HOME}/secret.txt; echo rc=$?`)).toBe(
      `cat: /proc/${globexShell}/root${SANDBOX_HOME}/secret.txt: No such file or directory\nrc=1\n`,
    );
    expect(await run(a.client, `kill -0 ${globexShell}; echo rc=$?`)).toBe(`bash: kill: (${globexShell}) - No such process\nrc=1\n`);
    expect(await run(a.client, `kill -KILL ${globexShell}; echo rc=$?`)).toBe(`bash: kill: (${globexShell}) - No such process\nrc=1\n`);
    expect(alive(globexShell)).toBe(true);
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

  /** Resolves once `runnerId` is the only runner of this block's edge (so sessions are placed on it). */
  async function alone(edgeUrl: string, runnerId: string): Promise<void> {
    await until(
      async () => {
        const res = await fetch(`${edgeUrl}/internal/runners`, { headers: { authorization: `Bearer ${token}` } });
        const body = (await res.json()) as { runners: { runnerId: string }[] };
        return body.runners.map((r) => r.runnerId).join() === runnerId;
      },
      30_000,
      `${runnerId} to be the edge's only runner`,
    );
  }

  it("ends a SIGKILLed runner's sandboxed session with the runner, its setsid and nohup children too", async () => {
    const { url: edgeUrl } = await ownEdge();
    const api = new Api(edgeUrl, key);
    const first = runner({ RUNNER_ID: "isolation-killed" }, edgeUrl);
    await alone(edgeUrl, "isolation-killed");
    const { pid, client } = await shell(api, edgeUrl);
    const { setsid, nohup } = await startEscapees(client, pid);

    // The sandbox's pid namespace ends with its init, which bubblewrap (--die-with-parent) ends
    // with the runner: nothing of the session waits for a runner to start again.
    first.kill("SIGKILL");
    await first.exited;
    const killedAt = performance.now();
    await until(() => !alive(setsid) && !alive(nohup), 5000, "the session's children to end with the runner");
    console.info(`isolation: sandboxed setsid and nohup children gone ${Math.round(performance.now() - killedAt)} ms after the runner's SIGKILL`);
  });

  it("without a sandbox (RUNNER_SANDBOX=none), ends what a SIGKILLed runner's session left when the runner starts again", async () => {
    // RUNNER_SANDBOX=none: the run record's path, the only one that ends a setsid child there
    // (in a sandbox, the previous test, nothing outlives the runner).
    const env = { RUNNER_ID: "isolation-restarted", RUNNER_SANDBOX: "none" };
    const { url: edgeUrl } = await ownEdge();
    const api = new Api(edgeUrl, key);
    const first = runner(env, edgeUrl);
    await alone(edgeUrl, "isolation-restarted");
    const { pid, client } = await shell(api, edgeUrl);
    const { setsid, nohup } = await startEscapees(client, pid, false);

    first.kill("SIGKILL");
    await first.exited;
    // Nothing ended them: the setsid one is in no terminal session the PTY's close reaches.
    expect(alive(setsid)).toBe(true);

    const again = runner(env, edgeUrl);
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
    await alone(edgeUrl, "isolation-nobody");
    const { client } = await shell(api, edgeUrl);
    const nobody = lookUpUser("nobody") as NonNullable<ReturnType<typeof lookUpUser>>;
    // Sandboxed (the default): the sandbox's /etc/passwd names the user, its home is /workspace.
    expect(await run(client, 'id -un; id -u; echo "$HOME"')).toBe(`nobody\n${nobody.uid}\n${SANDBOX_HOME}\n`);
    await named.stop();
  });
});
