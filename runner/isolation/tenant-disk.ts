// A tenant's workspace is a filesystem of its own, bounded by the tenant's `diskMiB` (admin API,
// sent with each spawn) or else TENANT_DISK_MIB (docs/security.md, "The sandbox"): an ext4 image
// per tenant, made with the system's own tools (`mkfs.ext4`) and loop-mounted (`mount -o loop`) on
// the tenant's folder the first time one of its sessions starts on this host. Writing past it
// gives ENOSPC inside; the host's disk and other tenants never notice.
// Images live in `<workspace>/.disks/` (root only, mode 0700), named by a hash of the tenant, and
// stay between sessions and runner restarts: the workspace is the tenant's, sessions come and go.
// The image takes the size the tenant has now (its own, else TENANT_DISK_MIB) at a spawn that finds
// no session of the tenant on this runner: the runner unmounts it, waits (up to a second) for its
// loop device to let it go (a session's namespace may hold the filesystem a moment longer; still
// held, it is mounted again as it is), resizes it offline (`e2fsck`, `resize2fs`; a shrink whose
// data does not fit leaves it as it is) and mounts it again. While
// sessions of the tenant run, a larger size grows it online (`resize2fs` on the mounted loop
// device, which needs CAP_SYS_RESOURCE); a smaller one, or a grow the kernel refuses, waits for a
// spawn that finds none. A runner unmounts, when it stops, what it mounted and nothing uses any
// more (the image stays).
import { execFileSync } from "node:child_process";
import { createHash } from "node:crypto";
import { closeSync, existsSync, ftruncateSync, mkdirSync, openSync, readFileSync, rmdirSync, statSync } from "node:fs";
import { join } from "node:path";
import { log } from "../../shared/log.js";

/** Mount points in /proc/self/mountinfo (field 5, with its octal escapes undone). */
export function mountPoints(mountinfo = "/proc/self/mountinfo"): Set<string> {
  const points = new Set<string>();
  for (const row of readFileSync(mountinfo, "utf8").split("\n")) {
    const field = row.split(" ")[4];
    if (field) points.add(field.replace(/\\([0-7]{3})/g, (_, octal: string) => String.fromCharCode(parseInt(octal, 8))));
  }
  return points;
}

function run(command: string, args: string[]): string {
  return execFileSync(command, args, { stdio: ["ignore", "pipe", "pipe"], env: { PATH: "/usr/sbin:/usr/bin:/sbin:/bin" }, encoding: "utf8" });
}

const MIB = 1024 * 1024;
/** Tries of an unmount at a spawn (a session that just ended may hold it for a moment), 20 ms apart. */
const UNMOUNT_TRIES = 10;
/** Looks, 20 ms apart, for the loop device to let an unmounted image go. */
const HELD_TRIES = 50;

/** Blocks for `ms` (only between unmount tries, while a spawn is prepared). */
function pause(ms: number): void {
  Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, ms);
}

/** Sets the file's length (sparse: the host's disk holds only what is written). */
function setLength(path: string, bytes: number, flags: "wx" | "r+"): void {
  const fd = openSync(path, flags, 0o600);
  try {
    ftruncateSync(fd, bytes);
  } finally {
    closeSync(fd);
  }
}

/** What a failed command said on stderr. */
function said(error: unknown): string {
  return String((error as { stderr?: Buffer | string }).stderr ?? error).trim();
}

export class TenantDisks {
  private readonly mounted = new Set<string>();
  /** Sessions of this runner using each mount point (ensure, release). */
  private readonly users = new Map<string, number>();
  private readonly folder: string;

  constructor(
    workspace: string,
    private readonly sizeMiB: number,
  ) {
    this.folder = join(workspace, ".disks");
    mkdirSync(this.folder, { recursive: true, mode: 0o700 });
  }

  /**
   * Makes sure the tenant's filesystem is mounted on `mountPoint` (made now if it does not exist
   * yet, its root owned by `owner`), sized `sizeMiB` (the tenant's own; absent: TENANT_DISK_MIB)
   * as far as the rules above allow, and counts one more session using it (`release` when it
   * ends). Throws when it cannot be mounted (the session fails to start).
   */
  ensure(tenant: string, mountPoint: string, owner: { uid: number; gid: number }, sizeMiB = this.sizeMiB): void {
    mkdirSync(mountPoint, { recursive: true, mode: 0o700 });
    const image = join(this.folder, `${createHash("sha256").update(tenant).digest("hex").slice(0, 24)}.img`);
    const size = (): number | null => (existsSync(image) ? statSync(image).size : null);
    let mounted = mountPoints().has(mountPoint);
    if (mounted && !this.users.has(mountPoint) && this.mounted.has(mountPoint) && size() !== sizeMiB * MIB) {
      // No session of the tenant here: the image takes its size before it is mounted again.
      mounted = !this.unmount(mountPoint, UNMOUNT_TRIES);
    }
    if (!mounted) this.mount(image, mountPoint, owner, sizeMiB);
    else if (sizeMiB * MIB > (size() ?? Number.POSITIVE_INFINITY)) this.growOnline(image, mountPoint, sizeMiB);
    this.users.set(mountPoint, (this.users.get(mountPoint) ?? 0) + 1);
  }

  /** A session that `ensure` counted on `mountPoint` has ended. */
  release(mountPoint: string): void {
    const left = (this.users.get(mountPoint) ?? 0) - 1;
    if (left > 0) this.users.set(mountPoint, left);
    else this.users.delete(mountPoint);
  }

  /** Mounts the tenant's image: made now at `sizeMiB` if there is none, else resized to it first. */
  private mount(image: string, mountPoint: string, owner: { uid: number; gid: number }, sizeMiB: number): void {
    const fresh = !existsSync(image);
    const held = fresh ? undefined : this.stillHeld(image);
    if (fresh) {
      setLength(image, sizeMiB * MIB, "wx");
      run("mkfs.ext4", ["-q", "-F", "-m", "0", "-E", `root_owner=${owner.uid}:${owner.gid}`, image]);
    } else if (statSync(image).size !== sizeMiB * MIB) {
      if (held) log.info("tenant_disk.resized", { mountPoint, sizeMiB, outcome: "deferred", reason: "in_use" });
      else this.resizeOffline(image, mountPoint, sizeMiB);
    }
    try {
      // Held: the device itself (mount's own loop setup would refuse the image as in use).
      run("mount", held ? ["-o", "nosuid,nodev", held, mountPoint] : ["-o", "loop,nosuid,nodev", image, mountPoint]);
    } catch (error) {
      // Another runner on this host may have mounted it meanwhile.
      if (mountPoints().has(mountPoint)) return;
      throw new Error(`the tenant's workspace filesystem could not be mounted: ${said(error)}`);
    }
    this.mounted.add(mountPoint);
    // mkfs makes lost+found; the workspace starts empty (e2fsck makes it again if it ever needs it).
    if (fresh) rmdirSync(join(mountPoint, "lost+found"));
    log.info("tenant_disk.mounted", { mountPoint, sizeMiB: statSync(image).size / MIB, outcome: fresh ? "made" : "existing" });
  }

  /**
   * Resizes the unmounted image to `sizeMiB`: checked first (resize2fs asks for it), the file
   * made longer before a grow and shorter after a shrink. A shrink whose data does not fit fails
   * before anything changes: the image keeps its size (logged), and the next spawn tries again.
   */
  private resizeOffline(image: string, mountPoint: string, sizeMiB: number): void {
    const current = statSync(image).size;
    const wanted = sizeMiB * MIB;
    try {
      try {
        run("e2fsck", ["-f", "-p", image]);
      } catch (error) {
        // 1: errors corrected; anything else leaves the image as it is.
        if ((error as { status?: number }).status !== 1) throw error;
      }
      if (wanted > current) setLength(image, wanted, "r+");
      run("resize2fs", [image, `${sizeMiB}M`]);
      if (wanted < current) setLength(image, wanted, "r+");
      log.info("tenant_disk.resized", { mountPoint, fromMiB: current / MIB, sizeMiB, outcome: wanted > current ? "grown" : "shrunk" });
    } catch (error) {
      if (statSync(image).size !== current) setLength(image, current, "r+");
      log.warn("tenant_disk.resized", { mountPoint, fromMiB: current / MIB, sizeMiB, outcome: "kept", error: said(error) });
    }
  }

  /**
   * Grows the mounted image to `sizeMiB` while sessions use it: the file, its loop device's
   * capacity, then the filesystem online. Refused (no CAP_SYS_RESOURCE, say), the file goes back
   * to its length and the grow waits for a spawn that finds no session of the tenant here.
   */
  private growOnline(image: string, mountPoint: string, sizeMiB: number): void {
    const current = statSync(image).size;
    let device: string | undefined;
    try {
      device = /^(\/dev\/loop\d+):/m.exec(run("losetup", ["-j", image]))?.[1];
      if (!device) throw new Error("no loop device holds the image");
      setLength(image, sizeMiB * MIB, "r+");
      run("losetup", ["-c", device]);
      run("resize2fs", [device]);
      log.info("tenant_disk.resized", { mountPoint, fromMiB: current / MIB, sizeMiB, outcome: "grown_online" });
    } catch (error) {
      // resize2fs refuses before it changes anything: the filesystem is still `current` long.
      if (statSync(image).size !== current) {
        setLength(image, current, "r+");
        if (device) run("losetup", ["-c", device]);
      }
      log.warn("tenant_disk.resized", { mountPoint, fromMiB: current / MIB, sizeMiB, outcome: "deferred", error: said(error) });
    }
  }

  /**
   * The loop device that still holds the unmounted image after a wait, if one does. The kernel
   * lets it go once the filesystem is mounted nowhere: a session's mount namespace that outlives
   * its session by a moment still holds it, and the image must not be resized meanwhile.
   */
  private stillHeld(image: string): string | undefined {
    for (let i = 0; ; i++) {
      const device = /^(\/dev\/loop\d+):/m.exec(run("losetup", ["-j", image]))?.[1];
      if (!device || i >= HELD_TRIES) return device;
      pause(20);
    }
  }

  /** Unmounts what this runner mounted; false when it is still in use after `tries`. */
  private unmount(mountPoint: string, tries: number): boolean {
    for (let i = 1; ; i++) {
      try {
        run("umount", [mountPoint]);
        this.mounted.delete(mountPoint);
        return true;
      } catch (error) {
        if (i >= tries) {
          log.info("tenant_disk.unmount", { mountPoint, outcome: "in_use", error: said(error) });
          return false;
        }
        pause(20);
      }
    }
  }

  /**
   * Unmounts what this runner mounted, where nothing uses it any more. One still in use (another
   * runner on this host shares the workspace and has a session there) stays mounted: never a
   * lazy unmount, which would let the next session mount the same image a second time.
   */
  close(): void {
    for (const mountPoint of [...this.mounted]) this.unmount(mountPoint, 1);
    this.mounted.clear();
  }
}
