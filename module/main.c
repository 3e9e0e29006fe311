// SPDX-License-Identifier: GPL-2.0
/*
 * hgclock: the /dev/hgclock misc device.
 *
 * Module init and exit, the file operations and the ioctl switch.  Each
 * ioctl has one helper in the file of its concern; this file only
 * dispatches.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/fs.h>
#include <linux/miscdevice.h>
#include <linux/module.h>

#include "hgclock_internal.h"

static long hgclock_ioctl(struct file *file, unsigned int cmd,
			  unsigned long arg)
{
	void __user *uarg = (void __user *)arg;

	switch (cmd) {
	case HGCLOCK_IOC_GET_INFO:
		return hgclock_ioctl_get_info(uarg);
	case HGCLOCK_IOC_READ_CLOCK:
		return hgclock_ioctl_read_clock(uarg);
	case HGCLOCK_IOC_NOP:
		return 0;
	case HGCLOCK_IOC_RING_CONFIG:
		return hgclock_ioctl_ring_config(uarg);
	case HGCLOCK_IOC_SNAPSHOT:
		return hgclock_ioctl_snapshot(uarg);
	case HGCLOCK_IOC_PRODUCE:
		return hgclock_ioctl_produce(uarg);
	case HGCLOCK_IOC_TRACK:
		return hgclock_ioctl_track(uarg);
	case HGCLOCK_IOC_LIST_VCPUS:
		return hgclock_ioctl_list_vcpus(uarg);
	case HGCLOCK_IOC_EXIT_PAIR:
		return hgclock_ioctl_exit_pair(uarg);
	default:
		return -ENOTTY;
	}
}

static int hgclock_release(struct inode *inode, struct file *file)
{
	hgclock_ring_release(file);
	return 0;
}

static const struct file_operations hgclock_fops = {
	.owner		= THIS_MODULE,
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

static int __init hgclock_init(void)
{
	int ret;

	ret = hgclock_ksym_init();
	if (ret)
		return ret;
	hgclock_conv_init();
	hgclock_pair_init();

	/* The ring before its producers, the device after both. */
	ret = hgclock_ring_init();
	if (ret)
		return ret;
	ret = hgclock_snapshot_init();
	if (ret)
		goto err_ring;
	ret = hgclock_track_init();
	if (ret)
		goto err_snapshot;
	ret = misc_register(&hgclock_misc);
	if (ret) {
		pr_err("cannot register /dev/%s: %d\n", HGCLOCK_DEVICE_NAME, ret);
		goto err_track;
	}
	pr_info("ABI %u.%u loaded\n", HGCLOCK_ABI_MAJOR, HGCLOCK_ABI_MINOR);
	return 0;

err_track:
	hgclock_track_exit();
err_snapshot:
	hgclock_snapshot_exit();
err_ring:
	hgclock_ring_exit();
	return ret;
}

/*
 * No file is open (each pins the module), so no ioctl or mapping is in
 * flight: stop the producers, then free what they wrote to.
 */
static void __exit hgclock_exit(void)
{
	misc_deregister(&hgclock_misc);
	hgclock_track_exit();
	hgclock_snapshot_exit();
	hgclock_ring_exit();
}

module_init(hgclock_init);
module_exit(hgclock_exit);

MODULE_DESCRIPTION("Exact host/guest trace clock correlation");
MODULE_LICENSE("GPL");
