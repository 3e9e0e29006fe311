/* SPDX-License-Identifier: GPL-2.0 */
/*
 * hgclock: declarations shared by the module's source files.
 */
#ifndef _HGCLOCK_INTERNAL_H
#define _HGCLOCK_INTERNAL_H

#include <linux/types.h>
#include <linux/fs.h>
#include <linux/poll.h>
#include <linux/smp.h>
#include <linux/uaccess.h>
#include <linux/hgclock.h>

/*
 * Reads an ioctl argument whose first member is its __u32 size, the way
 * openat2() and clone3() read theirs: a caller built against an older
 * header passes a smaller size (at least @min_size, the first published
 * one), a newer caller a larger size whose tail this kernel does not know
 * and which must then be zero (E2BIG otherwise; sizes above a page too).
 * On success @karg holds the caller's fields, zero-filled past its size,
 * and its size member says @ksize: what the kernel writes back.  The
 * ioctl numbers keep the first published size, so they never change.
 */
static inline int hgclock_copy_args_sized(void *karg, size_t ksize, size_t min_size,
					  const void __user *uarg)
{
	u32 usize;
	int ret;

	if (get_user(usize, (const u32 __user *)uarg))
		return -EFAULT;
	if (usize < min_size)
		return -EINVAL;
	if (usize > PAGE_SIZE)
		return -E2BIG;
	ret = copy_struct_from_user(karg, ksize, uarg, usize);
	if (ret)
		return ret;
	*(u32 *)karg = ksize;
	return 0;
}

/* Every struct argument is still at its first published size. */
#define hgclock_copy_args(karg, uarg) \
	hgclock_copy_args_sized((karg), sizeof(*(karg)), sizeof(*(karg)), (uarg))

/* clock.c: the READ_CLOCK and GET_INFO ioctls */
void hgclock_sample_this_cpu(struct hgclock_clock_sample *sample);
void hgclock_clock_init(void);
long hgclock_ioctl_read_clock(struct file *file, void __user *uarg);
void hgclock_read_clocksource(char *buf, size_t len);
void hgclock_read_hypervisor(char *buf, size_t len);

/* policy.c: who may do what */
bool hgclock_file_privileged(const struct file *file);
int hgclock_cross_cpu_budget(const struct file *file, unsigned int nr_cpus);

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

/* ring.c: the per-CPU record rings and their mapping */
int hgclock_ring_init(void);
void hgclock_ring_exit(void);
bool hgclock_ring_write(struct hgclock_rec_header *rec);
bool hgclock_ring_write_file(struct file *file, struct hgclock_rec_header *rec);
int hgclock_ring_open(struct file *file);
void hgclock_rec_init(struct hgclock_rec_header *rec, u16 type, u16 size);
bool hgclock_rec_emit(struct hgclock_rec_header *rec, u16 type, u16 size);
bool hgclock_rec_emit_stamped(struct hgclock_rec_header *rec);
void hgclock_ring_set_online(unsigned int cpu, bool online);
int hgclock_clock_mmap(struct file *file, struct vm_area_struct *vma);
void hgclock_ring_publish_conv(const struct hgclock_conversion *conv,
			       bool *changed);
int hgclock_mmap(struct file *file, struct vm_area_struct *vma);
__poll_t hgclock_poll(struct file *file, struct poll_table_struct *wait);
void hgclock_ring_release(struct file *file);
int hgclock_ring_configure(struct file *file, struct hgclock_ring_config *cfg,
			   bool *replaced);
void hgclock_ring_fill_info(struct file *file, struct hgclock_info *info);

/* snapshot.c: CYC2NS snapshots (periodic, hotplug, on demand) */
int hgclock_snapshot_init(void);
void hgclock_snapshot_exit(void);
void hgclock_snapshot_set_period(u64 period_ns);
u64 hgclock_snapshot_period(void);
int hgclock_snapshot_all(u32 reason, u32 *nr_written, u32 *late_cpu);
long hgclock_ioctl_snapshot(struct file *file, void __user *uarg);
long hgclock_ioctl_produce(struct file *file, void __user *uarg);

/* track.c: vCPU threads, their host CPUs and TSC offsets */
int hgclock_track_init(void);
void hgclock_track_exit(void);
void hgclock_track_reclaim(void);
bool hgclock_track_kvm_attached(void);
bool hgclock_track_exit_attached(void);
bool hgclock_track_pvclock_attached(void);
long hgclock_ioctl_track(struct file *file, void __user *uarg);
long hgclock_ioctl_list_vcpus(struct file *file, void __user *uarg);
void hgclock_track_release(const struct file *file);
void hgclock_track_fill_info(struct hgclock_info *info);

/* pair.c: exit pairing, the guest's half (track.c has the host's) */
int hgclock_pair_init(void);
void hgclock_pair_exit(void);
bool hgclock_pair_available(void);
long hgclock_ioctl_exit_pair(struct file *file, void __user *uarg);

/* xcall.c: calls on other CPUs in interrupt context, with a deadline */
#define HGCLOCK_XCALL_TIMEOUT_MS	HGCLOCK_EXIT_PAIR_TIMEOUT_MS	/* ABI: the same bound */
#define HGCLOCK_XCALL_RESULT_MAX	64
struct hgclock_xcall;
void hgclock_xcall_init(void);
void hgclock_xcall_exit(void);
int hgclock_xcall(const struct cpumask *cpus, smp_call_func_t func, u64 arg,
		  void *results, size_t result_size, u32 *late_cpu);
void *hgclock_xcall_result(struct hgclock_xcall *xc);
u64 hgclock_xcall_arg(const struct hgclock_xcall *xc);
void hgclock_xcall_answer(struct hgclock_xcall *xc);

/* ksym.c: data the kernel does not export, looked up once at load */
int hgclock_ksym_init(void);
void *hgclock_ksym_data(const char *name);
bool hgclock_sched_clock_stable(void);

#endif /* _HGCLOCK_INTERNAL_H */
