/* SPDX-License-Identifier: GPL-2.0 */
/*
 * hgclock: declarations shared by the module's source files.
 */
#ifndef _HGCLOCK_INTERNAL_H
#define _HGCLOCK_INTERNAL_H

#include <linux/types.h>
#include <linux/fs.h>
#include <linux/poll.h>
#include <linux/hgclock.h>

/* clock.c: the READ_CLOCK and GET_INFO ioctls */
void hgclock_sample_this_cpu(struct hgclock_clock_sample *sample);
long hgclock_ioctl_get_info(void __user *uarg);
long hgclock_ioctl_read_clock(void __user *uarg);

/* conv.c: the per-CPU TSC to sched_clock conversion */
enum hgclock_conv_source {
	HGCLOCK_SRC_NONE,	/* no usable conversion */
	HGCLOCK_SRC_CYC2NS,	/* native TSC sched_clock, proven exact */
	HGCLOCK_SRC_PVCLOCK,	/* kvm-clock, exact while pvclock is stable */
	HGCLOCK_SRC_DERIVED,	/* fitted from tsc_khz and bracketed reads */
};
void hgclock_conv_init(void);
enum hgclock_conv_source hgclock_conv_source(void);
void hgclock_conv_read(struct hgclock_conversion *conv);
u64 hgclock_conv_apply(const struct hgclock_conversion *conv, u64 tsc);
u64 hgclock_conv_kernel_ns(u64 tsc);

/* ring.c: the per-CPU record rings and their mapping */
int hgclock_ring_init(void);
void hgclock_ring_exit(void);
bool hgclock_ring_write(struct hgclock_rec_header *rec);
void hgclock_rec_init(struct hgclock_rec_header *rec, u16 type, u16 size);
bool hgclock_rec_emit(struct hgclock_rec_header *rec, u16 type, u16 size);
void hgclock_ring_set_online(unsigned int cpu, bool online);
void hgclock_ring_publish_conv(const struct hgclock_conversion *conv,
			       bool *changed);
u64 hgclock_ring_next_snap_seq(void);
int hgclock_mmap(struct file *file, struct vm_area_struct *vma);
__poll_t hgclock_poll(struct file *file, struct poll_table_struct *wait);
void hgclock_ring_release(struct file *file);
long hgclock_ioctl_ring_config(void __user *uarg);
void hgclock_ring_fill_info(struct hgclock_info *info);

/* snapshot.c: CYC2NS snapshots (periodic, hotplug, on demand) */
int hgclock_snapshot_init(void);
void hgclock_snapshot_exit(void);
void hgclock_snapshot_set_period(u64 period_ns);
u64 hgclock_snapshot_period(void);
unsigned int hgclock_snapshot_all(u32 reason);
long hgclock_ioctl_snapshot(void __user *uarg);
long hgclock_ioctl_produce(void __user *uarg);

/* track.c: vCPU threads, their host CPUs and TSC offsets */
int hgclock_track_init(void);
void hgclock_track_exit(void);
void hgclock_track_reclaim(void);
bool hgclock_track_kvm_attached(void);
bool hgclock_track_exit_attached(void);
bool hgclock_track_pvclock_attached(void);
long hgclock_ioctl_track(void __user *uarg);
long hgclock_ioctl_list_vcpus(void __user *uarg);

/* pair.c: exit pairing, the guest's half (track.c has the host's) */
void hgclock_pair_init(void);
bool hgclock_pair_available(void);
long hgclock_ioctl_exit_pair(void __user *uarg);

/* ksym.c: symbols the kernel does not export, looked up once at load */
int hgclock_ksym_init(void);
unsigned long hgclock_ksym(const char *name);
bool hgclock_sched_clock_stable(void);

#endif /* _HGCLOCK_INTERNAL_H */
