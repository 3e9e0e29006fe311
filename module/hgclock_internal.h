/* SPDX-License-Identifier: GPL-2.0 */
/*
 * hgclock: declarations shared by the module's source files.
 */
#ifndef _HGCLOCK_INTERNAL_H
#define _HGCLOCK_INTERNAL_H

#include <linux/types.h>
#include <linux/hgclock.h>

/* clock.c: the READ_CLOCK and GET_INFO ioctls */
void hgclock_sample_this_cpu(struct hgclock_clock_sample *sample);
long hgclock_ioctl_get_info(void __user *uarg);
long hgclock_ioctl_read_clock(void __user *uarg);

/* ksym.c: symbols the kernel does not export, looked up once at load */
int hgclock_ksym_init(void);
unsigned long hgclock_ksym(const char *name);
bool hgclock_sched_clock_stable(void);

#endif /* _HGCLOCK_INTERNAL_H */
