// The programs the tests run that npm cannot bring: chromium (test/web.test.ts drives the page in
// it), redis-server and redis-cli (the output log, the Redis Cluster), tmux (test/cli.test.ts),
// vim (test/cli.test.ts detaches from inside it; sessions run it from their own PATH) and
// asciinema (test/recording.test.ts plays recordings back with `asciinema cat`); and the programs
// the runner builds each session's sandbox with (runner/isolation/, docs/security.md): bwrap
// (bubblewrap), slirp4netns, nft (nftables), mkfs.ext4 (e2fsprogs), losetup and mount (Debian's
// `mount`), nsenter and setpriv (util-linux), ip (iproute2), and python3-seccomp (the system's
// /usr/bin/python3 with libseccomp's bindings: the sandbox's seccomp filter and fresh keyring).
//
// `tsx scripts/test-tools.ts` (npm's `pretest`) finds each one, or provides it from Debian's
// packages, and writes where it is to node_modules/.cache/ptybroker-test-tools/tools.json:
//   1. on PATH (chromium also at /usr/bin/chromium; the sandbox's programs in /usr/bin, /bin,
//      /usr/sbin or /sbin only, where the runner takes them from): used as it is;
//   2. as root with apt-get: `apt-get update`, `apt-get install --no-install-recommends` (CI's way);
//   3. otherwise, without root: `apt-get download` the package and the dependencies that are not
//      installed (the set `apt-get -s install` would install), `dpkg-deb -x` them into the cache,
//      and write a wrapper per program that sets LD_LIBRARY_PATH to the unpacked libraries;
//   4. else it fails, saying what is missing and the command that installs it. No suite is skipped.
// The sandbox's programs never take step 3: the runner runs them as root, from the system, to
// make namespaces, mounts, cgroups and firewall rules; an unpacked copy without root could do none
// of that, and as root step 2 installs the real package. Without root, a missing one fails at
// step 4 with the command that installs it.
// Nothing is downloaded from anywhere but Debian's package archives (apt's configured sources).
// The tests ask `toolPath(name)`. PTYB_TEST_TOOLS_FORCE_LOCAL=1 ignores installed copies and takes
// step 3 for every program that step can provide (to check that path on a machine that has them);
// the sandbox's programs are still taken from the system.
import { execFileSync, spawnSync } from "node:child_process";
import { accessSync, constants, existsSync, mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { delimiter, dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

export type Tool =
  | "chromium"
  | "redis-server"
  | "redis-cli"
  | "tmux"
  | "vim"
  | "asciinema"
  | "bwrap"
  | "slirp4netns"
  | "nft"
  | "mkfs.ext4"
  | "losetup"
  | "mount"
  | "nsenter"
  | "setpriv"
  | "ip"
  | "python3-seccomp";

/**
 * Per program: its Debian package, who needs it (for messages), and either the real binary inside
 * the package (step 3 can unpack it) or `system` (only from the system: steps 1, 2 and 4). A
 * `program` other than the name, and a `probe` (its arguments) that must succeed: a package that
 * is a module of a program rather than a program (python3-seccomp: /usr/bin/python3 importing it).
 */
type ToolSource = { pkg: string; for: string; program?: string; probe?: string[] } & (
  | { binary: string; system?: undefined }
  | { system: true; binary?: undefined }
);

const SANDBOX = "the runner's session sandbox (runner/isolation/)";

const TOOLS: Record<Tool, ToolSource> = {
  // /usr/bin/chromium is Debian's shell wrapper; unpacked, we start the real binary ourselves.
  chromium: { pkg: "chromium", binary: "usr/lib/chromium/chromium", for: "test/web.test.ts" },
  "redis-server": { pkg: "redis-server", binary: "usr/bin/redis-server", for: "the Redis output log tests" },
  "redis-cli": { pkg: "redis-tools", binary: "usr/bin/redis-cli", for: "the Redis Cluster tests" },
  tmux: { pkg: "tmux", binary: "usr/bin/tmux", for: "test/cli.test.ts" },
  vim: { pkg: "vim", binary: "usr/bin/vim.basic", for: "test/cli.test.ts (detach from inside vim)" },
  // A Python program: unpacked, its modules are found through PYTHONPATH (localTool).
  asciinema: { pkg: "asciinema", binary: "usr/bin/asciinema", for: "test/recording.test.ts (asciinema cat)" },
  bwrap: { pkg: "bubblewrap", system: true, for: SANDBOX },
  slirp4netns: { pkg: "slirp4netns", system: true, for: SANDBOX },
  nft: { pkg: "nftables", system: true, for: SANDBOX },
  "mkfs.ext4": { pkg: "e2fsprogs", system: true, for: SANDBOX },
  // Debian 12 ships losetup and mount in `mount`, nsenter and setpriv in `util-linux`.
  losetup: { pkg: "mount", system: true, for: SANDBOX },
  mount: { pkg: "mount", system: true, for: SANDBOX },
  nsenter: { pkg: "util-linux", system: true, for: SANDBOX },
  setpriv: { pkg: "util-linux", system: true, for: SANDBOX },
  ip: { pkg: "iproute2", system: true, for: SANDBOX },
  "python3-seccomp": { pkg: "python3-seccomp", system: true, program: "python3", probe: ["-I", "-c", "import seccomp"], for: SANDBOX },
};
const NAMES = Object.keys(TOOLS) as Tool[];

const ROOT = join(dirname(fileURLToPath(import.meta.url)), "..");
/** Git-ignored (under node_modules): downloaded .debs, their unpacked tree, wrappers, tools.json. */
export const CACHE = join(ROOT, "node_modules/.cache/ptybroker-test-tools");
const RESOLVED = join(CACHE, "tools.json");
const FORCE_LOCAL = process.env.PTYB_TEST_TOOLS_FORCE_LOCAL === "1";

/** Where `name` is: what the pretest step resolved, else PATH; throws saying how to get it. */
export function toolPath(name: Tool): string {
  const resolved = existsSync(RESOLVED) ? (JSON.parse(readFileSync(RESOLVED, "utf8")) as Partial<Record<Tool, string>>) : {};
  const path = resolved[name] ?? onPath(name);
  if (!path) throw new Error(`${name} not found: run \`npx tsx scripts/test-tools.ts\` (npm test's pretest step)`);
  return path;
}

/**
 * The executable called `name` on PATH (chromium also at /usr/bin/chromium), or undefined. The
 * sandbox's programs only where the runner takes them from: the system's folders, never PATH.
 */
function onPath(name: Tool): string | undefined {
  const { system, program = name, probe } = TOOLS[name];
  const dirs = system ? ["/usr/bin", "/bin", "/usr/sbin", "/sbin"] : (process.env.PATH ?? "").split(delimiter).filter(Boolean);
  if (name === "chromium") dirs.push("/usr/bin");
  const path = dirs.map((dir) => join(dir, program)).find(executable);
  if (path && probe && spawnSync(path, probe, { stdio: "ignore" }).status !== 0) return undefined;
  return path;
}

function executable(path: string): boolean {
  try {
    accessSync(path, constants.X_OK);
    return true;
  } catch {
    return false;
  }
}

function has(command: string): boolean {
  return spawnSync("sh", ["-c", `command -v ${command}`], { stdio: "ignore" }).status === 0;
}

function say(line: string): void {
  console.log(`test-tools: ${line}`);
}

/** Runs a command quietly; throws with the end of its output if it fails. */
function run(command: string, args: string[], cwd?: string): void {
  const env = { ...process.env, DEBIAN_FRONTEND: "noninteractive" };
  const result = spawnSync(command, args, { cwd, env, encoding: "utf8", maxBuffer: 64 << 20 });
  if (result.status !== 0) {
    const output = `${result.stdout ?? ""}${result.stderr ?? ""}`.trim().split("\n").slice(-20).join("\n");
    throw new Error(`\`${command} ${args.join(" ")}\` failed (${result.status ?? result.signal ?? result.error?.message}):\n${output}`);
  }
}

/** Step 2: as root, install the packages with apt-get. */
function aptInstall(packages: string[], reason: string): void {
  say(`apt-get update (to install ${packages.join(", ")} for ${reason})`);
  run("apt-get", ["update", "-qq"]);
  say(`installing ${packages.join(", ")} from Debian's packages for ${reason} (first run only${packages.includes("chromium") ? ", ~30 s for chromium" : ""})`);
  run("apt-get", ["install", "-y", "-qq", "--no-install-recommends", ...packages]);
}

/** Step 3: without root, download and unpack the packages and their missing dependencies. */
function unpackLocally(packages: string[], reason: string): void {
  // What apt would install here: the missing dependencies (apt's own choice among alternatives).
  // The packages themselves are named too, in case they are installed but ignored (FORCE_LOCAL).
  const plan = execFileSync("apt-get", ["-s", "install", "--no-install-recommends", ...packages], { encoding: "utf8" });
  const wanted = new Set(packages);
  for (const match of plan.matchAll(/^Inst (\S+)/gm)) wanted.add(match[1] as string);
  const debs = join(CACHE, "debs");
  mkdirSync(debs, { recursive: true });
  say(`downloading ${wanted.size} Debian packages (${packages.join(", ")} and what they need that is not installed) for ${reason}, without root, into ${debs} (first run only)`);
  run("apt-get", ["download", "-q", ...wanted], debs);
  say(`unpacking them into ${join(CACHE, "root")}`);
  for (const file of readdirSync(debs).filter((f) => f.endsWith(".deb"))) {
    run("dpkg-deb", ["-x", join(debs, file), join(CACHE, "root")]);
  }
  rmSync(debs, { recursive: true, force: true });
}

/** A wrapper in the cache that runs the unpacked binary with the unpacked libraries; undefined if not unpacked. */
function localTool(name: Tool): string | undefined {
  const inside = TOOLS[name].binary;
  if (inside === undefined) return undefined; // the system's only
  const root = join(CACHE, "root");
  const binary = join(root, inside);
  if (!existsSync(binary)) return undefined;
  const libraries = libraryDirs(root).join(":");
  const wrapper = join(CACHE, "bin", name);
  mkdirSync(dirname(wrapper), { recursive: true });
  const script = [
    "#!/bin/sh",
    `# ${name} unpacked by scripts/test-tools.ts, run with its unpacked libraries.`,
    `export LD_LIBRARY_PATH='${libraries}'\${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}`,
    `export PYTHONPATH='${join(root, "usr/lib/python3/dist-packages")}'\${PYTHONPATH:+:$PYTHONPATH}`,
    `exec '${binary}' "$@"`,
  ].join("\n");
  writeFileSync(wrapper, `${script}\n`, { mode: 0o755 });
  return wrapper;
}

/**
 * Every folder under `root` holding a shared library (lib*.so*), but the programs' own folders
 * (/usr/lib/chromium loads its private libraries itself; they need not reach tmux's shells).
 */
function libraryDirs(root: string): string[] {
  const own = new Set(NAMES.flatMap((name) => TOOLS[name].binary ?? []).map((binary) => dirname(join(root, binary))));
  const found: string[] = [];
  const walk = (dir: string) => {
    const entries = readdirSync(dir, { withFileTypes: true });
    if (!own.has(dir) && entries.some((e) => !e.isDirectory() && /^lib.*\.so(\.|$)/.test(e.name))) found.push(dir);
    for (const e of entries) if (e.isDirectory()) walk(join(dir, e.name));
  };
  if (existsSync(root)) walk(root);
  return found;
}

/** The Debian packages of `names`, once each, and what they are for. */
function packagesOf(names: Tool[]): { packages: string[]; reason: string } {
  return {
    packages: [...new Set(names.map((name) => TOOLS[name].pkg))],
    reason: [...new Set(names.map((name) => TOOLS[name].for))].join(", "),
  };
}

function main(): void {
  const started = performance.now();
  const find = (name: Tool) => (TOOLS[name].system ? onPath(name) : ((FORCE_LOCAL ? undefined : onPath(name)) ?? localTool(name)));
  const missing = NAMES.filter((name) => !find(name));
  const apt = process.getuid?.() === 0 && has("apt-get");
  // Step 2 for the sandbox's programs always, for the others unless FORCE_LOCAL; step 3 for the rest.
  const viaApt = apt ? missing.filter((name) => TOOLS[name].system || !FORCE_LOCAL) : [];
  const unpack = missing.filter((name) => !viaApt.includes(name) && !TOOLS[name].system);
  const systemOnly = missing.filter((name) => !viaApt.includes(name) && TOOLS[name].system);
  if (systemOnly.length > 0) {
    const { packages, reason } = packagesOf(systemOnly);
    throw new Error(
      `missing ${systemOnly.join(", ")} (for ${reason}); they run as root from the system and are never unpacked here: install them (\`sudo apt-get install -y --no-install-recommends ${packages.join(" ")}\`) and run npm test again`,
    );
  }
  if (viaApt.length > 0) {
    const { packages, reason } = packagesOf(viaApt);
    aptInstall(packages, reason);
  }
  if (unpack.length > 0) {
    const { packages, reason } = packagesOf(unpack);
    const install = `sudo apt-get install -y --no-install-recommends ${packages.join(" ")}`;
    if (!has("apt-get") || !has("dpkg-deb")) {
      throw new Error(`missing ${unpack.join(", ")} (for ${reason}); providing them takes root with apt-get, or apt-get and dpkg-deb: install them (\`${install}\`) and run npm test again`);
    }
    try {
      unpackLocally(packages, reason);
    } catch (error) {
      throw new Error(`missing ${unpack.join(", ")} (for ${reason}) and could not unpack them without root (${(error as Error).message.trim()}); install them (\`${install}\`) and run npm test again`);
    }
  }
  const resolved: Partial<Record<Tool, string>> = {};
  for (const name of NAMES) {
    const path = find(name);
    if (!path) throw new Error(`${name} (Debian package ${TOOLS[name].pkg}, for ${TOOLS[name].for}) is still missing after installing it`);
    resolved[name] = path;
  }
  mkdirSync(CACHE, { recursive: true });
  writeFileSync(RESOLVED, `${JSON.stringify(resolved, null, 2)}\n`);
  const took = missing.length > 0 ? ` (provided ${missing.join(", ")} in ${((performance.now() - started) / 1000).toFixed(1)} s)` : "";
  say(`${NAMES.map((name) => `${name}=${resolved[name]}`).join(" ")}${took}`);
}

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  try {
    main();
  } catch (error) {
    console.error(`test-tools: ${(error as Error).message}`);
    process.exit(1);
  }
}
