// Who a session's processes run as (docs/security.md). A runner that is root never lets a session
// run as root: with RUNNER_SESSION_USER=per-tenant each tenant gets its own unprivileged system
// user, made once with the system's own groupadd/useradd; with RUNNER_SESSION_USER=<name> every
// session runs as that existing user. A runner that is not root cannot switch users: its
// sessions run as itself (and can read its credentials), which it says once at start.
import { execFileSync } from "node:child_process";
import { createHash } from "node:crypto";
import { chmodSync, chownSync, lstatSync, mkdirSync } from "node:fs";
import { userInfo } from "node:os";
import { resolve } from "node:path";
import { log } from "../../shared/log.js";

export interface SessionUser {
  name: string;
  uid: number;
  gid: number;
  shell: string;
  /** true when sessions switch to this user; false: the runner's own user */
  switched: boolean;
}

export type SessionUserMode = "per-tenant" | "named" | "runner";

export interface SessionUsers {
  readonly mode: SessionUserMode;
  /** The user a session of `tenant` runs as (made on first use in per-tenant mode). */
  forTenant(tenant: string): SessionUser;
}

/** RUNNER_SESSION_USER's value that gives every tenant its own user. */
export const PER_TENANT = "per-tenant";
const TENANT_SHELL = "/bin/bash";

/**
 * The system user of `tenant`: deterministic, so every runner on a host (and every restart)
 * agrees on it, and valid for Debian's useradd (lowercase, at most 32 characters) whatever the
 * tenant's name (`[A-Za-z0-9_-]{1,64}`).
 */
export function tenantUserName(tenant: string): string {
  return `ptyb-${createHash("sha256").update(tenant).digest("hex").slice(0, 12)}`;
}

/**
 * Decides once, at start, who sessions run as; throws a start-up error for a setting that
 * cannot be honoured (a named user that is root or missing, or that a non-root runner cannot
 * switch to).
 */
export function sessionUsers(setting: string, workspace: string, isRoot = process.getuid?.() === 0): SessionUsers {
  if (!isRoot) {
    const me = runnerUser();
    if (setting !== PER_TENANT && setting !== me.username) {
      throw new Error(
        `RUNNER_SESSION_USER=${setting}: the runner is not root and cannot run sessions as another user ` +
          `(run it as root, or leave RUNNER_SESSION_USER at ${PER_TENANT})`,
      );
    }
    log.warn("runner.isolation", {
      outcome: "shared_user",
      user: me.username,
      reason: "the runner is not root: sessions run as its own user and can read its credentials (/proc/<runner>/environ)",
    });
    const own: SessionUser = { name: me.username, uid: me.uid, gid: me.gid, shell: me.shell || TENANT_SHELL, switched: false };
    return { mode: "runner", forTenant: () => own };
  }
  if (setting !== PER_TENANT) {
    const named = lookUpUser(setting);
    if (!named) throw new Error(`RUNNER_SESSION_USER=${setting}: no such user`);
    if (named.uid === 0 || named.gid === 0) {
      throw new Error(`RUNNER_SESSION_USER=${setting}: sessions may not run as root (uid or gid 0); name an unprivileged user`);
    }
    log.info("runner.isolation", { outcome: "named_user", user: named.name, uid: named.uid });
    return { mode: "named", forTenant: () => named };
  }
  log.info("runner.isolation", { outcome: "per_tenant_users" });
  const known = new Map<string, SessionUser>();
  return {
    mode: "per-tenant",
    forTenant(tenant) {
      let user = known.get(tenant);
      if (!user) {
        user = ensureTenantUser(tenant, resolve(workspace, tenant));
        known.set(tenant, user);
      }
      return user;
    },
  };
}

/** The runner's own user (a uid without a passwd entry, as in some containers, is named by its number). */
function runnerUser(): { username: string; uid: number; gid: number; shell: string | null } {
  try {
    return userInfo();
  } catch {
    const uid = process.getuid?.() ?? -1;
    return { username: String(uid), uid, gid: process.getgid?.() ?? -1, shell: null };
  }
}

/** The passwd entry of `name` (through NSS, as `getent` sees it), or null if there is none. */
export function lookUpUser(name: string): SessionUser | null {
  return passwdEntry(name)?.user ?? null;
}

function passwdEntry(name: string): { user: SessionUser; gecos: string } | null {
  let entry: string;
  try {
    entry = execFileSync("getent", ["passwd", name], { encoding: "utf8", stdio: ["ignore", "pipe", "ignore"] });
  } catch {
    return null; // exit 2: no such user
  }
  const fields = entry.trim().split("\n")[0].split(":");
  if (fields.length < 7) return null;
  return { user: { name: fields[0], uid: Number(fields[2]), gid: Number(fields[3]), shell: fields[6] || TENANT_SHELL, switched: true }, gecos: fields[4] };
}

const CREATE_ATTEMPTS = 10;
/**
 * The GECOS of every tenant's user: the same for all, naming no tenant (the host's /etc/passwd is
 * readable by every local user and by unsandboxed sessions; the tenant is known from the name's hash only).
 */
export const TENANT_GECOS = "ptybroker tenant";

/**
 * The tenant's user, made now if it does not exist yet: its own group (groupadd), then the user
 * (useradd: a system user, no password, home the tenant's workspace folder, shell bash, GECOS
 * TENANT_GECOS). Other runners on the host may be making the same user at the same moment:
 * "already exists" (exit 9) is success, and a locked /etc/passwd (another useradd at work) is
 * tried again. Runs synchronously (about 40 ms, once per tenant per runner process): a session
 * starts in one step. A user made by an earlier version, whose GECOS named its tenant, is given
 * TENANT_GECOS (usermod; a failure is logged, and tried again by the next runner process).
 */
function ensureTenantUser(tenant: string, home: string): SessionUser {
  const name = tenantUserName(tenant);
  let lastError = "";
  for (let attempt = 1; attempt <= CREATE_ATTEMPTS; attempt++) {
    const existing = passwdEntry(name);
    if (existing) {
      if (existing.gecos === `${TENANT_GECOS} ${tenant}`) renameGecos(tenant, name);
      return existing.user;
    }
    const group = run("groupadd", ["--system", name]);
    const user =
      group.status === 0 || group.status === 9
        ? run("useradd", [
            "--system",
            "--gid",
            name,
            "--home-dir",
            home,
            "--no-create-home",
            "--shell",
            TENANT_SHELL,
            "--comment",
            TENANT_GECOS,
            name,
          ])
        : group;
    const made = lookUpUser(name);
    if (made) {
      if (user.status === 0) log.info("session_user.created", { tenant, user: name, uid: made.uid });
      return made;
    }
    lastError = user.stderr.trim();
    log.warn("session_user.create", { tenant, user: name, attempt, outcome: "retry", error: lastError });
    blockFor(20 * attempt); // another runner holds the lock on /etc/passwd or /etc/group
  }
  throw new Error(`could not create the session user ${name} for tenant ${tenant}: ${lastError}`);
}

/** usermod --comment TENANT_GECOS, tried again while another tool holds /etc/passwd's lock. */
function renameGecos(tenant: string, name: string): void {
  let result = { status: -1, stderr: "" };
  for (let attempt = 1; attempt <= CREATE_ATTEMPTS; attempt++) {
    result = run("usermod", ["--comment", TENANT_GECOS, name]);
    if (result.status === 0) {
      log.info("session_user.gecos", { tenant, user: name, outcome: "renamed" });
      return;
    }
    blockFor(20 * attempt);
  }
  log.warn("session_user.gecos", { tenant, user: name, outcome: "failed", error: result.stderr.trim() });
}

function run(command: string, args: string[]): { status: number; stderr: string } {
  try {
    execFileSync(command, args, { stdio: ["ignore", "ignore", "pipe"] });
    return { status: 0, stderr: "" };
  } catch (error) {
    const failed = error as { status?: number | null; stderr?: Buffer; message: string };
    return { status: failed.status ?? -1, stderr: failed.stderr?.toString("utf8") || failed.message };
  }
}

function blockFor(ms: number): void {
  Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, ms);
}

/**
 * The workspace root under a root runner: owned by root and mode 0711, so that a session's user
 * reaches its own folder through it but cannot list the others or make anything in it.
 */
export function prepareWorkspaceRoot(workspace: string): void {
  mkdirSync(workspace, { recursive: true, mode: 0o711 });
  const stat = lstatSync(workspace);
  if (!stat.isDirectory()) throw new Error(`RUNNER_WORKSPACE ${workspace} is not a directory`);
  if (stat.uid !== 0 || stat.gid !== 0) chownSync(workspace, 0, 0);
  if ((stat.mode & 0o7777) !== 0o711) chmodSync(workspace, 0o711);
}

/**
 * The tenant's workspace folder as its user's home: made if missing, owned by the user, mode
 * 0700 so that no other tenant's user can list or read it. A folder left by earlier runs under
 * another owner (root, before sessions had their own users) is handed over with everything in
 * it (`chown -R`, which does not follow symbolic links).
 */
export function prepareHome(folder: string, user: SessionUser): void {
  mkdirSync(folder, { recursive: true, mode: 0o700 });
  const stat = lstatSync(folder);
  if (!stat.isDirectory()) throw new Error(`the tenant's workspace ${folder} is not a directory`);
  if (stat.uid !== user.uid || stat.gid !== user.gid) {
    if (stat.uid !== user.uid) {
      execFileSync("chown", ["-R", "-P", `${user.uid}:${user.gid}`, "--", folder], { stdio: ["ignore", "ignore", "pipe"] });
      log.info("session_user.home", { user: user.name, folder, outcome: "handed_over", previousUid: stat.uid });
    } else chownSync(folder, user.uid, user.gid);
  }
  if ((stat.mode & 0o7777) !== 0o700) chmodSync(folder, 0o700);
}
