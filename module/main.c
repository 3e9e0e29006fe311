// SPDX-License-Identifier: GPL-2.0
/*
 * hgclock: the /dev/hgclock misc device.
 *
 * The file layer: module init and exit, the file operations, the ioctl
 * switch, and the two ioctls that gather from several parts (GET_INFO,
 * RING_CONFIG).  The module is layered; calls only go down
 * (Documentation/design.rst has the same picture and the locks):
 *
 *   main.c      file operations, dispatch, GET_INFO, RING_CONFIG
 *     |
 *     +--> clock.c (READ_CLOCK)   pair.c (EXIT_PAIR)
 *     +--> snapshot.c (CYC2NS snapshots: timers, hotplug, resume;
 *     |                SNAPSHOT, PRODUCE)
 *     +--> track.c (vCPU tracking: probes, reclaim; TRACK, LIST_VCPUS)
 *            |
 *            v
 *   ring.c (rings, mmap, poll)   conv.c -> ksym.c   policy.c
 *   xcall.c (cross-CPU calls with a deadline: READ_CLOCK, SNAPSHOT)
 *
 * In the bottom row ring.c calls policy.c and conv.c calls ksym.c; ksym.c,
 * policy.c and xcall.c call nothing else.  The middle files call only the
 * bottom row, never each other (make check: tools/layer-check.py).
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/capability.h>
#include <linux/cpu.h>
#include <linux/fs.h>
#include <linux/miscdevice.h>
#include <linux/mm.h>
#include <linux/module.h>
#include <asm/cpufeature.h>
#include <asm/tsc.h>

#include "hgclock_internal.h"

static_assert(sizeof(struct hgclock_info) == HGCLOCK_INFO_SIZE_VER0);

/*
 * Whether KVM is loaded here: kvm.ko exports kvm_get_kvm.  symbol_get
 * pins the module for the instant we look; we drop it at once.
 */
static bool hgclock_kvm_loaded(void)
{
	void *sym = __symbol_get("kvm_get_kvm");

	if (!sym)
		return false;
	__symbol_put("kvm_get_kvm");
	return true;
}

static long hgclock_ioctl_get_info(struct file *file, void __user *uarg)
{
	struct hgclock_info info;
	__u32 usize, flags;
	bool guest, host;

	if (get_user(usize, (__u32 __user *)uarg))
		return -EFAULT;
	if (usize < HGCLOCK_INFO_SIZE_VER0 || usize > PAGE_SIZE)
		return -EINVAL;
	if (get_user(flags, (__u32 __user *)uarg + 1))
		return -EFAULT;
	if (flags)
		return -EINVAL;

	memset(&info, 0, sizeof(info));
	info.size = min_t(__u32, usize, sizeof(info));
	info.abi_major = HGCLOCK_ABI_MAJOR;
	info.abi_minor = HGCLOCK_ABI_MINOR;
	info.nr_cpu_ids = nr_cpu_ids;
	info.nr_online_cpus = num_online_cpus();
	info.tsc_khz = tsc_khz;
	info.features = HGCLOCK_FEAT_READ_CLOCK | HGCLOCK_FEAT_READ_ALL_CPUS |
			HGCLOCK_FEAT_RING | HGCLOCK_FEAT_TRACK;
	if (hgclock_track_kvm_attached())
		info.features |= HGCLOCK_FEAT_KVM_TRACK;
	if (hgclock_track_exit_attached())
		info.features |= HGCLOCK_FEAT_EXIT_TRACK;
	if (hgclock_track_pvclock_attached())
		info.features |= HGCLOCK_FEAT_PVCLOCK_TRACK;
	if (hgclock_pair_available())
		info.features |= HGCLOCK_FEAT_EXIT_PAIR;
	info.features |= HGCLOCK_FEAT_PAIR_OPT_IN | HGCLOCK_FEAT_PUBLIC_CLOCK;
	if (hgclock_conv_source() != HGCLOCK_SRC_NONE)
		info.features |= HGCLOCK_FEAT_USER_CLOCK;
	if (hgclock_conv_source() == HGCLOCK_SRC_PVCLOCK)
		info.clock_flags |= HGCLOCK_CLK_PVCLOCK_SCHED_CLOCK;
	else if (hgclock_conv_source() != HGCLOCK_SRC_NONE)
		info.clock_flags |= HGCLOCK_CLK_NATIVE_SCHED_CLOCK;
	hgclock_ring_fill_info(file, &info);
	hgclock_track_fill_info(&info);
	info.snapshot_period_ns = hgclock_snapshot_period();

	if (check_tsc_unstable())
		info.clock_flags |= HGCLOCK_CLK_TSC_UNSTABLE;
	if (hgclock_sched_clock_stable())
		info.clock_flags |= HGCLOCK_CLK_SCHED_CLOCK_STABLE;
	if (boot_cpu_has(X86_FEATURE_CONSTANT_TSC))
		info.clock_flags |= HGCLOCK_CLK_CONSTANT_TSC;
	if (boot_cpu_has(X86_FEATURE_NONSTOP_TSC))
		info.clock_flags |= HGCLOCK_CLK_NONSTOP_TSC;

	guest = boot_cpu_has(X86_FEATURE_HYPERVISOR);
	host = hgclock_kvm_loaded();
	if (guest && host)
		info.role = HGCLOCK_ROLE_NESTED;
	else if (guest)
		info.role = HGCLOCK_ROLE_GUEST;
	else if (host)
		info.role = HGCLOCK_ROLE_HOST;
	else
		info.role = HGCLOCK_ROLE_BARE;

	hgclock_read_clocksource(info.clocksource, sizeof(info.clocksource));
	hgclock_read_hypervisor(info.hypervisor, sizeof(info.hypervisor));

	/*
	 * A larger caller buffer than ours: we write only what we know and
	 * say so in info.size, the caller's tail is left as it was.
	 */
	if (copy_to_user(uarg, &info, info.size))
		return -EFAULT;
	return 0;
}

/*
 * RING_CONFIG: the ring's part in ring.c, the snapshot period in
 * snapshot.c; this layer checks the argument and the caller and puts
 * the two together, so that neither calls the other.
 */
static long hgclock_ioctl_ring_config(struct file *file, void __user *uarg)
{
	struct hgclock_ring_config cfg;
	bool replaced;
	long ret;
	int i;

	ret = hgclock_copy_args(&cfg, uarg);
	if (ret)
		return ret;
	if (cfg.flags & ~HGCLOCK_CFG_FLAGS_ALL)
		return -EINVAL;
	for (i = 0; i < ARRAY_SIZE(cfg.reserved); i++)
		if (cfg.reserved[i])
			return -EINVAL;
	/* The ring size and watermark are the session's; the period is everyone's. */
	if ((cfg.flags & HGCLOCK_CFG_SET_PERIOD) && !capable(CAP_SYS_ADMIN))
		return -EPERM;
	if ((cfg.flags & HGCLOCK_CFG_SET_PERIOD) && cfg.snapshot_period_ns &&
	    (cfg.snapshot_period_ns < NSEC_PER_MSEC ||
	     cfg.snapshot_period_ns > HGCLOCK_SNAPSHOT_PERIOD_MAX_NS))
		return -EINVAL;

	ret = hgclock_ring_configure(file, &cfg, &replaced);
	if (ret)
		return ret;
	if (cfg.flags & HGCLOCK_CFG_SET_PERIOD)
		hgclock_snapshot_set_period(cfg.snapshot_period_ns);
	/*
	 * A fresh ring starts with every CPU's conversion in it; a CPU that
	 * does not answer in time writes its snapshot when it does.  The
	 * ring layer charged these CPUs to the unprivileged budget of
	 * interrupted CPUs before it replaced anything (EAGAIN past it).
	 */
	if (replaced) {
		u32 nr_written, late_cpu;

		cpus_read_lock();
		hgclock_snapshot_all(HGCLOCK_SNAP_START, &nr_written, &late_cpu);
		cpus_read_unlock();
	}
	cfg.flags = 0;
	cfg.snapshot_period_ns = hgclock_snapshot_period();
	if (copy_to_user(uarg, &cfg, sizeof(cfg)))
		return -EFAULT;
	return 0;
}

static long hgclock_ioctl(struct file *file, unsigned int cmd,
			  unsigned long arg)
{
	void __user *uarg = (void __user *)arg;

	switch (cmd) {
	case HGCLOCK_IOC_GET_INFO:
		return hgclock_ioctl_get_info(file, uarg);
	case HGCLOCK_IOC_READ_CLOCK:
		return hgclock_ioctl_read_clock(file, uarg);
	case HGCLOCK_IOC_NOP:
		return 0;
	case HGCLOCK_IOC_RING_CONFIG:
		return hgclock_ioctl_ring_config(file, uarg);
	case HGCLOCK_IOC_SNAPSHOT:
		return hgclock_ioctl_snapshot(file, uarg);
	case HGCLOCK_IOC_PRODUCE:
		return hgclock_ioctl_produce(file, uarg);
	case HGCLOCK_IOC_TRACK:
		return hgclock_ioctl_track(file, uarg);
	case HGCLOCK_IOC_LIST_VCPUS:
		return hgclock_ioctl_list_vcpus(file, uarg);
	case HGCLOCK_IOC_EXIT_PAIR:
		return hgclock_ioctl_exit_pair(file, uarg);
	default:
		return -ENOTTY;
	}
}

static int hgclock_open(struct inode *inode, struct file *file)
{
	/* A session of its own: its rings, consumer and ring size. */
	return hgclock_ring_open(file);
}

static int hgclock_release(struct inode *inode, struct file *file)
{
	hgclock_track_release(file);
	hgclock_ring_release(file);
	return 0;
}

static const struct file_operations hgclock_fops = {
	.owner		= THIS_MODULE,
	.open		= hgclock_open,
	.release	= hgclock_release,
	.mmap		= hgclock_mmap,
	.poll		= hgclock_poll,
	.unlocked_ioctl	= hgclock_ioctl,
	.compat_ioctl	= compat_ptr_ioctl,
	.llseek		= noop_llseek,
};

/* Root only by default; a udev rule may widen it (Documentation/uapi.rst). */
static struct miscdevice hgclock_misc = {
	.minor	= MISC_DYNAMIC_MINOR,
	.name	= HGCLOCK_DEVICE_NAME,
	.fops	= &hgclock_fops,
	.mode	= 0600,
};

/*
 * /dev/hgclock-clock: the per-CPU conversions alone, for every user, so
 * that any application reads perf's and ftrace's clock without a syscall
 * (Documentation/uapi.rst says why that leaks nothing).  No open or
 * release of its own: nothing is allocated per open; an open file pins
 * the module (owner), and so does a mapping (it holds the file).
 */
static const struct file_operations hgclock_clock_fops = {
	.owner		= THIS_MODULE,
	.mmap		= hgclock_clock_mmap,
	.llseek		= noop_llseek,
};

static struct miscdevice hgclock_clock_misc = {
	.minor	= MISC_DYNAMIC_MINOR,
	.name	= HGCLOCK_CLOCK_DEVICE_NAME,
	.fops	= &hgclock_clock_fops,
	.mode	= 0444,
};

static int __init hgclock_init(void)
{
	int ret;

	ret = hgclock_ksym_init();
	if (ret)
		return ret;
	hgclock_conv_init();
	hgclock_clock_init();
	hgclock_xcall_init();

	/*
	 * The ring before its producers (the pairings' workqueue, the
	 * snapshots, the tracking), the devices after all of them.
	 */
	ret = hgclock_ring_init();
	if (ret)
		return ret;
	ret = hgclock_pair_init();
	if (ret)
		goto err_ring;
	ret = hgclock_snapshot_init();
	if (ret)
		goto err_pair;
	ret = hgclock_track_init();
	if (ret)
		goto err_snapshot;
	ret = misc_register(&hgclock_clock_misc);
	if (ret) {
		pr_err("cannot register /dev/%s: %d\n", HGCLOCK_CLOCK_DEVICE_NAME, ret);
		goto err_track;
	}
	/*
	 * Last: /dev/hgclock's open puts a session on the session list, and
	 * an open can come the instant the device is registered.  Nothing
	 * may fail after that, or the unwind would free the rings and the
	 * list under a session still open.  /dev/hgclock-clock allocates
	 * nothing per open, so unwinding it (err_clock_misc) is safe.
	 */
	ret = misc_register(&hgclock_misc);
	if (ret) {
		pr_err("cannot register /dev/%s: %d\n", HGCLOCK_DEVICE_NAME, ret);
		goto err_clock_misc;
	}
	pr_info("ABI %u.%u loaded\n", HGCLOCK_ABI_MAJOR, HGCLOCK_ABI_MINOR);
	return 0;

err_clock_misc:
	misc_deregister(&hgclock_clock_misc);
err_track:
	hgclock_track_exit();
err_snapshot:
	hgclock_snapshot_exit();
err_pair:
	hgclock_pair_exit();
err_ring:
	hgclock_xcall_exit();
	hgclock_ring_exit();
	return ret;
}

/*
 * No file is open (each pins the module), so no ioctl or mapping is in
 * flight: remove the devices in the reverse order of init, stop the
 * producers, drain the pairings that callers gave up waiting for, then
 * free what they all wrote to.
 */
static void __exit hgclock_exit(void)
{
	misc_deregister(&hgclock_misc);
	misc_deregister(&hgclock_clock_misc);
	hgclock_track_exit();
	hgclock_snapshot_exit();
	hgclock_pair_exit();
	hgclock_xcall_exit();
	hgclock_ring_exit();
}

module_init(hgclock_init);
module_exit(hgclock_exit);

MODULE_DESCRIPTION("Exact host/guest trace clock correlation");
MODULE_LICENSE("GPL");
