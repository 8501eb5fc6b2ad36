// A tenant's workspace is a filesystem of its own, bounded by the tenant's `diskMiB` (admin API,
// sent with each spawn) or else TENANT_DISK_MIB (docs/security.md, "The sandbox"): an ext4 image
// per tenant, made with the system's own tools (`mkfs.ext4`) and loop-mounted (`mount -o loop`) on
// the tenant's folder the first time one of its sessions starts on this host. Writing past it
// gives ENOSPC inside; the host's disk and other tenants never notice.
// Images live in `<workspace>/.disks/` (root only, mode 0700), named by a hash of the tenant, and
// stay between sessions and runner restarts: the workspace is the tenant's, sessions come and go.
// A size larger than the image's grows it, mounted, at the tenant's next spawn (the file, the loop
// device's capacity, then the filesystem online with `resize2fs`). A smaller size does not shrink
// an image that exists (ext4 shrinks only unmounted, and only if the data fits): it applies to an
// image made anew. A runner unmounts, when it stops, what it mounted and nothing uses any more
// (the image stays).
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
   * yet, its root owned by `owner`) and is at least `sizeMiB` (the tenant's own; absent:
   * TENANT_DISK_MIB) when it can grow to it. Throws when it cannot be mounted (the session fails
   * to start).
   */
  ensure(tenant: string, mountPoint: string, owner: { uid: number; gid: number }, sizeMiB = this.sizeMiB): void {
    mkdirSync(mountPoint, { recursive: true, mode: 0o700 });
    const image = join(this.folder, `${createHash("sha256").update(tenant).digest("hex").slice(0, 24)}.img`);
    if (!mountPoints().has(mountPoint) && this.mount(image, mountPoint, owner, sizeMiB) === "made") return;
    const current = statSync(image).size;
    if (sizeMiB * MIB > current) this.grow(image, mountPoint, current, sizeMiB);
  }

  /** Mounts the tenant's image, made now at `sizeMiB` if there is none; "made", "existing", or "raced" (another runner mounted it). */
  private mount(image: string, mountPoint: string, owner: { uid: number; gid: number }, sizeMiB: number): "made" | "existing" | "raced" {
    const fresh = !existsSync(image);
    if (fresh) {
      setLength(image, sizeMiB * MIB, "wx");
      run("mkfs.ext4", ["-q", "-F", "-m", "0", "-E", `root_owner=${owner.uid}:${owner.gid}`, image]);
    }
    try {
      run("mount", ["-o", "loop,nosuid,nodev", image, mountPoint]);
    } catch (error) {
      // Another runner on this host may have mounted it meanwhile.
      if (mountPoints().has(mountPoint)) return "raced";
      throw new Error(`the tenant's workspace filesystem could not be mounted: ${said(error)}`);
    }
    this.mounted.add(mountPoint);
    // mkfs makes lost+found; the workspace starts empty (e2fsck makes it again if it ever needs it).
    if (fresh) rmdirSync(join(mountPoint, "lost+found"));
    log.info("tenant_disk.mounted", { mountPoint, sizeMiB: fresh ? sizeMiB : statSync(image).size / MIB, outcome: fresh ? "made" : "existing" });
    return fresh ? "made" : "existing";
  }

  /**
   * Grows the mounted image to `sizeMiB`: the file, its loop device's capacity, then the
   * filesystem online. A failure is logged and the session starts on the filesystem as it is; the
   * file keeps its new length, so the next try comes with a size larger still.
   */
  private grow(image: string, mountPoint: string, current: number, sizeMiB: number): void {
    try {
      const device = /^(\/dev\/loop\d+):/m.exec(run("losetup", ["-j", image]))?.[1];
      if (!device) throw new Error("no loop device holds the image");
      setLength(image, sizeMiB * MIB, "r+");
      run("losetup", ["-c", device]);
      run("resize2fs", [device]);
      log.info("tenant_disk.grown", { mountPoint, fromMiB: current / MIB, sizeMiB, outcome: "grown" });
    } catch (error) {
      log.warn("tenant_disk.grown", { mountPoint, fromMiB: current / MIB, sizeMiB, outcome: "failed", error: said(error) });
    }
  }

  /**
   * Unmounts what this runner mounted, where nothing uses it any more. One still in use (another
   * runner on this host shares the workspace and has a session there) stays mounted: never a
   * lazy unmount, which would let the next session mount the same image a second time.
   */
  close(): void {
    for (const mountPoint of this.mounted) {
      try {
        run("umount", [mountPoint]);
      } catch (error) {
        log.info("tenant_disk.unmount", { mountPoint, outcome: "in_use", error: said(error) });
      }
    }
    this.mounted.clear();
  }
}
