// A tenant's workspace is a filesystem of its own, bounded by TENANT_DISK_MIB (docs/security.md,
// "The sandbox"): an ext4 image per tenant, made with the system's own tools (`mkfs.ext4`) and
// loop-mounted (`mount -o loop`) on the tenant's folder the first time one of its sessions starts
// on this host. Writing past it gives ENOSPC inside; the host's disk and other tenants never notice.
// Images live in `<workspace>/.disks/` (root only, mode 0700), named by a hash of the tenant, and
// stay between sessions and runner restarts: the workspace is the tenant's, sessions come and go.
// A runner unmounts, when it stops, what it mounted and nothing uses any more (the image stays).
import { execFileSync } from "node:child_process";
import { createHash } from "node:crypto";
import { closeSync, existsSync, ftruncateSync, mkdirSync, openSync, readFileSync, rmdirSync } from "node:fs";
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

function run(command: string, args: string[]): void {
  execFileSync(command, args, { stdio: ["ignore", "ignore", "pipe"], env: { PATH: "/usr/sbin:/usr/bin:/sbin:/bin" } });
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
   * yet, its root owned by `owner`). Throws when it cannot be (the session fails to start).
   */
  ensure(tenant: string, mountPoint: string, owner: { uid: number; gid: number }): void {
    mkdirSync(mountPoint, { recursive: true, mode: 0o700 });
    if (mountPoints().has(mountPoint)) return;
    const image = join(this.folder, `${createHash("sha256").update(tenant).digest("hex").slice(0, 24)}.img`);
    const fresh = !existsSync(image);
    if (fresh) {
      // Sparse: the host's disk holds only what is written.
      const fd = openSync(image, "wx", 0o600);
      try {
        ftruncateSync(fd, this.sizeMiB * 1024 * 1024);
      } finally {
        closeSync(fd);
      }
      run("mkfs.ext4", ["-q", "-F", "-m", "0", "-E", `root_owner=${owner.uid}:${owner.gid}`, image]);
    }
    try {
      run("mount", ["-o", "loop,nosuid,nodev", image, mountPoint]);
    } catch (error) {
      // Another runner on this host may have mounted it meanwhile.
      if (mountPoints().has(mountPoint)) return;
      throw new Error(`the tenant's workspace filesystem could not be mounted: ${String((error as { stderr?: Buffer }).stderr ?? error).trim()}`);
    }
    this.mounted.add(mountPoint);
    // mkfs makes lost+found; the workspace starts empty (e2fsck makes it again if it ever needs it).
    if (fresh) rmdirSync(join(mountPoint, "lost+found"));
    log.info("tenant_disk.mounted", { mountPoint, sizeMiB: this.sizeMiB, outcome: fresh ? "made" : "existing" });
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
        log.info("tenant_disk.unmount", { mountPoint, outcome: "in_use", error: String((error as { stderr?: Buffer }).stderr ?? error).trim() });
      }
    }
    this.mounted.clear();
  }
}
