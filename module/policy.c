// SPDX-License-Identifier: GPL-2.0
/*
 * hgclock: who may do what.  The ioctl helpers of every layer ask here;
 * this file calls nothing else of the module.
 */
#include <linux/capability.h>
#include <linux/fs.h>
#include <linux/jiffies.h>
#include <linux/spinlock.h>
#include <linux/user_namespace.h>

#include "hgclock_internal.h"

/*
 * Did the file's opener have CAP_PERFMON or CAP_SYS_ADMIN (what
 * perfmon_capable() accepts) when it opened the device?  The file's
 * credentials, not the caller's: a privileged recorder may hand its
 * descriptor on, an unprivileged process cannot gain the right by the way
 * it calls.  Tracking, listing vCPUs and the cross-CPU budget go by it.
 */
bool hgclock_file_privileged(const struct file *file)
{
	return file_ns_capable(file, &init_user_ns, CAP_PERFMON) ||
	       file_ns_capable(file, &init_user_ns, CAP_SYS_ADMIN);
}

/*
 * The shared budget of interrupted CPUs for unprivileged files (see
 * HGCLOCK_UNPRIV_CROSS_CPU_PER_SEC): 0, or -EAGAIN when this call would
 * exceed this second's budget.  A privileged opener is not limited.
 */
int hgclock_cross_cpu_budget(const struct file *file, unsigned int nr_cpus)
{
	static DEFINE_SPINLOCK(lock);
	static unsigned long window_start;
	static unsigned int used;
	int ret = 0;

	if (!nr_cpus || hgclock_file_privileged(file))
		return 0;
	spin_lock(&lock);
	if (time_after_eq(jiffies, window_start + HZ)) {
		window_start = jiffies;
		used = 0;
	}
	if (used + nr_cpus > HGCLOCK_UNPRIV_CROSS_CPU_PER_SEC)
		ret = -EAGAIN;
	else
		used += nr_cpus;
	spin_unlock(&lock);
	return ret;
}
