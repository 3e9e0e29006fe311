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
	default:
		return -ENOTTY;
	}
}

static const struct file_operations hgclock_fops = {
	.owner		= THIS_MODULE,
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

	ret = misc_register(&hgclock_misc);
	if (ret) {
		pr_err("cannot register /dev/%s: %d\n", HGCLOCK_DEVICE_NAME, ret);
		return ret;
	}
	pr_info("ABI %u.%u loaded\n", HGCLOCK_ABI_MAJOR, HGCLOCK_ABI_MINOR);
	return 0;
}

static void __exit hgclock_exit(void)
{
	misc_deregister(&hgclock_misc);
}

module_init(hgclock_init);
module_exit(hgclock_exit);

MODULE_DESCRIPTION("Exact host/guest trace clock correlation");
MODULE_LICENSE("GPL");
