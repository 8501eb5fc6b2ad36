// The one module that runs bubblewrap: the command line that puts a session in a sandbox of its
// own (docs/security.md, "The sandbox"):
// - its own pid, mount, ipc, uts, network and cgroup namespaces: it sees only its own processes,
//   its own /proc, a hostname that names no tenant, and (network.ts) no service of the host;
// - the system read-only (/usr, /etc, /opt and the merged-usr links), and nothing else of the
//   host: no state folder, no other workspace, no /home, /root, /run, /var or /sys;
// - the tenant's workspace read-write at /workspace (its own filesystem, tenant-disk.ts), its home;
// - a private /tmp and /dev/shm (tmpfs of SESSION_TMP_MIB each; /var/tmp is /tmp);
// - /etc/passwd and /etc/group naming only root and the session's user, and /etc/resolv.conf
//   naming the network's own resolver, all written from memory (--ro-bind-data), not from files;
//   the host's other user and group files (useradd's backups passwd- and group-, which name every
//   tenant's user, the shadow files, subuid and subgid) covered by an empty file each;
// - a devpts of its own (bubblewrap's --dev mounts a new instance) bounded to SESSION_PTYS
//   terminals (`max=`, set by the sandbox's first step, as root inside): the host's pty pool
//   (kernel.pty.max, counted across every instance) is not one session's to use up;
// - the shell integration's init file read-only at /run/ptybroker/bash-init (its only copy).
// - the seccomp filter (seccomp.ts, seccomp-profile.py) on what bubblewrap runs: read from fd 9.
// --die-with-parent: if the session's first process (the root step, then bubblewrap itself) dies,
// everything in the sandbox dies with it. bubblewrap runs as root here (no user namespace): the
// drop to the session's user is the command it runs (launch.ts, dropStep).
import { existsSync, lstatSync, readlinkSync } from "node:fs";
import { join } from "node:path";

/** Where the tenant's workspace is inside: the session user's home. */
export const SANDBOX_HOME = "/workspace";
/** Where the shell integration's init file is inside. */
export const SANDBOX_BASH_INIT = "/run/ptybroker/bash-init";
/** The hostname inside every sandbox. */
export const SANDBOX_HOSTNAME = "sandbox";

export interface SandboxSpec {
  /** bubblewrap's path */
  bwrap: string;
  /** the tenant's workspace folder on the host */
  workspace: string;
  /** size of /tmp and /dev/shm */
  tmpMiB: number;
  network: "none" | "egress";
  /** the shell integration's init file on the host, or null */
  bashInit: string | null;
  user: { name: string; uid: number; gid: number };
  /** the seccomp filter's BPF on the host (root-only): the root step opens it as fd 9 */
  seccomp: string;
  /** egress: the nftables rules the sandbox installs in its namespace before it says ready on fd 3 and waits for go on fd 4 (network.ts); null: none */
  egressRules: string | null;
  /** how many pseudo-terminals the sandbox may hold at once (SESSION_PTYS) */
  ptys: number;
  /** an empty regular file on the host, bound over the host's files in /etc a sandbox must not see (HIDDEN_ETC) */
  empty: string;
  /** what runs inside (the drop step) */
  command: string[];
}

/** The egress network's resolver (slirp4netns forwards it to the host's). */
export const SANDBOX_RESOLVER = "10.0.2.3";

/** Binds for the top-level system folders: merged-usr links stay links, real folders are bound read-only. */
function systemMounts(): string[] {
  const args = ["--ro-bind", "/usr", "/usr", "--ro-bind", "/etc", "/etc"];
  if (existsSync("/opt")) args.push("--ro-bind", "/opt", "/opt");
  for (const top of ["/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"]) {
    const stat = lstatSync(top, { throwIfNoEntry: false });
    if (!stat) continue;
    if (stat.isSymbolicLink()) args.push("--symlink", readlinkSync(top), top);
    else if (stat.isDirectory()) args.push("--ro-bind", top, top);
  }
  return args;
}

let system: string[] | undefined;

/**
 * The host's files in /etc that a sandbox sees empty: the user and group databases but the two
 * the sandbox has of its own (useradd's and vipw's backups name every tenant's user, with its
 * home folder), the shadow files and the subordinate id ranges.
 */
export const HIDDEN_ETC = ["passwd-", "group-", "shadow", "shadow-", "gshadow", "gshadow-", "subuid", "subuid-", "subgid", "subgid-"] as const;

/**
 * Binds of `empty` over each of HIDDEN_ETC the host has now, as a regular file (looked at for each
 * session: a backup appears with the host's first useradd). A mount needs its target to exist,
 * and /etc is read-only in the sandbox: one the host does not have is absent inside too.
 */
function hiddenEtc(empty: string): string[] {
  const args: string[] = [];
  for (const name of HIDDEN_ETC) {
    const path = join("/etc", name);
    if (lstatSync(path, { throwIfNoEntry: false })?.isFile()) args.push("--ro-bind", empty, path);
  }
  return args;
}

/** Where an egress sandbox reads its nftables rules (root only, mode 0600). */
const RULES = "/run/ptybroker/egress.nft";

// The sandbox's first step, inside, as root, before the drop. $0 = SESSION_PTYS. It remounts the
// sandbox's devpts (bubblewrap's, a new instance: nosuid, noexec, mode=620, ptmxmode=0666) with
// the same options and `max=` (a remount resets what it does not name; source and target both
// given, so mount reads no fstab; -n: no utab). An egress sandbox, first of all, says "ns" on fd
// 3 (its namespace exists: the runner attaches slirp4netns meanwhile), and after the remount
// installs its rules (nothing of the session has run yet), says ready on fd 3, waits for the
// runner's go on fd 4 (slirp4netns attached) and closes both. Then it execs the drop step.
function firstStep(egress: boolean): string {
  return [
    ...(egress ? ["echo ns >&3 || exit 126"] : []),
    'mount -n -o "remount,nosuid,noexec,mode=620,ptmxmode=0666,max=$0" devpts /dev/pts || exit 126',
    ...(egress ? [`nft -f ${RULES} || exit 126`, "echo ready >&3 || exit 126", "read go <&4 || exit 126", "exec 3>&- 4<&-"] : []),
    'exec "$@"',
  ].join("\n");
}

/** The fd bubblewrap reads the seccomp filter from. */
export const SECCOMP_FD = 9;

/** bubblewrap's command line for one session, the texts it reads from fds 5–8 and the file it reads from fd 9. */
export function sandboxCommand(spec: SandboxSpec): { args: string[]; data: Record<number, string>; files: Record<number, string> } {
  system ??= systemMounts();
  if (!Number.isInteger(spec.ptys) || spec.ptys < 1) throw new Error(`unexpected pty bound ${spec.ptys}`);
  const tmpBytes = String(spec.tmpMiB * 1024 * 1024);
  const passwd = `root:x:0:0:root:/root:/usr/sbin/nologin\n${spec.user.name}:x:${spec.user.uid}:${spec.user.gid}::${SANDBOX_HOME}:/bin/bash`;
  const group = `root:x:0:\n${spec.user.name}:x:${spec.user.gid}:`;
  const resolv = spec.network === "egress" ? `nameserver ${SANDBOX_RESOLVER}` : "";
  const args = [
    "--unshare-pid",
    "--unshare-ipc",
    "--unshare-uts",
    "--unshare-net",
    "--unshare-cgroup",
    "--die-with-parent",
    "--seccomp",
    String(SECCOMP_FD),
    "--hostname",
    SANDBOX_HOSTNAME,
    ...system,
    ...hiddenEtc(spec.empty),
    "--perms",
    "0644",
    "--ro-bind-data",
    "5",
    "/etc/passwd",
    "--perms",
    "0644",
    "--ro-bind-data",
    "6",
    "/etc/group",
    "--perms",
    "0644",
    "--ro-bind-data",
    "7",
    "/etc/resolv.conf",
    "--proc",
    "/proc",
    "--dev",
    "/dev",
    "--perms",
    "1777",
    "--size",
    tmpBytes,
    "--tmpfs",
    "/dev/shm",
    "--perms",
    "1777",
    "--size",
    tmpBytes,
    "--tmpfs",
    "/tmp",
    "--dir",
    "/var",
    "--symlink",
    "../tmp",
    "/var/tmp",
    "--tmpfs",
    "/run",
    // The folder made first, searchable by all (bubblewrap would make it 0700 for the bind).
    "--perms",
    "0755",
    "--dir",
    "/run/ptybroker",
    ...(spec.bashInit ? ["--ro-bind", spec.bashInit, SANDBOX_BASH_INIT] : []),
    ...(spec.egressRules !== null ? ["--perms", "0600", "--ro-bind-data", "8", RULES] : []),
    "--bind",
    spec.workspace,
    SANDBOX_HOME,
    "--chdir",
    SANDBOX_HOME,
    "--",
    "/bin/sh",
    "-c",
    firstStep(spec.egressRules !== null),
    String(spec.ptys),
    ...spec.command,
  ];
  const data: Record<number, string> = { 5: passwd, 6: group, 7: resolv };
  if (spec.egressRules !== null) data[8] = spec.egressRules;
  return { args: [spec.bwrap, ...args], data, files: { [SECCOMP_FD]: spec.seccomp } };
}
