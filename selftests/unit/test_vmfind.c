// SPDX-License-Identifier: GPL-2.0
/*
 * Unit tests of user/record/vmfind.c: finding a guest's QEMU process, vsock CID
 * and vCPU threads in fake /proc and libvirt trees built in a temporary
 * directory (command lines short and far beyond 4 KiB, both -device
 * forms, libvirt pid files and XML, a fake virsh).
 */
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "kselftest_harness.h"
#include "vmfind.h"

/* ---- building fake trees ---- */

static void put_file(const char *path, const void *data, size_t len)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0755);

	if (fd < 0 || write(fd, data, len) != (ssize_t)len) {
		perror(path);
		exit(1);
	}
	close(fd);
}

static void put_text(const char *root, const char *rel, const char *text)
{
	char path[512];

	snprintf(path, sizeof(path), "%s/%s", root, rel);
	put_file(path, text, strlen(text));
}

static void mkdirs(const char *root, const char *rel)
{
	char path[512];

	snprintf(path, sizeof(path), "%s/%s", root, rel);
	for (char *s = path + strlen(root) + 1; *s; s++) {
		if (*s == '/') {
			*s = 0;
			mkdir(path, 0755);
			*s = '/';
		}
	}
	mkdir(path, 0755);
}

/* A process: its arguments (NULL-terminated) written NUL-separated as cmdline. */
static void add_proc(const char *root, int pid, const char *const *argv)
{
	char rel[64], *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);

	for (; *argv; argv++)
		fwrite(*argv, strlen(*argv) + 1, 1, f);
	fclose(f);
	snprintf(rel, sizeof(rel), "proc/%d", pid);
	mkdirs(root, rel);
	snprintf(rel, sizeof(rel), "%s/proc/%d/cmdline", root, pid);
	put_file(rel, buf, len);
	free(buf);
}

static void add_thread(const char *root, int pid, int tid, const char *comm)
{
	char rel[64];

	snprintf(rel, sizeof(rel), "proc/%d/task/%d", pid, tid);
	mkdirs(root, rel);
	snprintf(rel, sizeof(rel), "proc/%d/task/%d/comm", pid, tid);
	put_text(root, rel, comm);
}

/* libvirt's JSON -device for a vsock device, as it writes it. */
#define LIBVIRT_VSOCK(cid) \
	"{\"driver\":\"vhost-vsock-pci\",\"id\":\"vsock0\",\"guest-cid\":" #cid \
	",\"vhostfd\":\"28\",\"bus\":\"pci.7\",\"addr\":\"0x0\"}"

static char long_arg[9000];	/* pushes what follows past 8 KiB */

static const char *const qemu_kv3[] = { "qemu-system-x86_64", "-m", "512", "-device",
	"vhost-vsock-pci,id=vsock0,guest-cid=3", NULL };
static const char *const qemu_web[] = { "/usr/bin/qemu-system-x86_64", "-name",
	"guest=web,debug-threads=on", "-S", "-object", long_arg, "-device", LIBVIRT_VSOCK(4),
	NULL };
static const char *const qemu_cid5[] = { "qemu-system-x86_64", "-device",
	"vhost-vsock-device,guest-cid=5", NULL };
static const char *const sudo_cid6[] = { "sudo", "qemu-system-x86_64", "-device",
	"vhost-vsock-pci,guest-cid=6", NULL };
static const char *const qemu_cid6[] = { "qemu-system-x86_64", "-device",
	"vhost-vsock-pci,guest-cid=6", NULL };
static const char *const bash[] = { "/bin/bash", "-c", "echo guest-cid=3", NULL };
static const char *const qemu_db[] = { "qemu-system-x86_64", "-name", "db", "-device",
	LIBVIRT_VSOCK(8), NULL };
static const char *const qemu_cf[] = { "qemu-kvm", "-name", "guest=cf", "-device",
	LIBVIRT_VSOCK(9), NULL };
static const char *const qemu_nv[] = { "qemu-system-x86_64", "-name", "guest=nv", NULL };
static const char *const qemu_vx[] = { "qemu-system-x86_64", "-name", "guest=vx", "-device",
	"vhost-vsock-pci,guest-cid=11", NULL };
static const char *const qemu_dup[] = { "qemu-system-x86_64", "-name", "guest=dup", NULL };
static const char *const qemu_bad[] = { "qemu-system-x86_64", "-name", "guest=bad",
	"-device", "{\"driver\":\"vhost-vsock-pci\",\"guest-cid\":3", NULL };

static const char status_xml_4[] =
	"<domstatus state='running' reason='booted' pid='200'>\n"
	"  <domain type='kvm' id='1'>\n    <name>web</name>\n    <devices>\n"
	"      <vsock model='virtio'>\n        <cid auto='yes' address='4'/>\n"
	"        <alias name='vsock0'/>\n      </vsock>\n    </devices>\n  </domain>\n"
	"</domstatus>\n";

/*
 * The fake virsh: "dumpxml --domain NAME" prints an XML for stopped and
 * dead (defined, no CID yet: not running) and vx (CID 11); for noconn it
 * cannot reach libvirtd, for hang it hangs; any other name is unknown.
 */
static const char fake_virsh[] =
	"#!/bin/sh\n"
	"[ \"$1 $2\" = 'dumpxml --domain' ] || exit 3\n"
	"case $3 in\n"
	"stopped|dead) echo \"<domain><name>$3</name><devices><vsock model='virtio'>"
	"<cid auto='yes'/></vsock></devices></domain>\" ;;\n"
	"vx) echo \"<domain><devices><vsock model='virtio'><cid auto='no' address='11'/>"
	"</vsock></devices></domain>\" ;;\n"
	"noconn) echo 'error: failed to connect to the hypervisor' >&2; exit 1 ;;\n"
	"hang) exec sleep 5 ;;\n"
	"*) echo \"error: failed to get domain '$3'\" >&2; exit 1 ;;\n"
	"esac\n";

static int rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st; (void)flag; (void)ftw;
	return remove(path);
}

FIXTURE(tree) {
	char root[64];
	char proc[96], run[96], virsh[96];
	struct vmfind vf;
};

FIXTURE_SETUP(tree)
{
	char *long_cmdline;

	snprintf(self->root, sizeof(self->root), "/tmp/hgvmfind-%d", getpid());
	ASSERT_EQ(0, mkdir(self->root, 0755));
	snprintf(self->proc, sizeof(self->proc), "%s/proc", self->root);
	snprintf(self->run, sizeof(self->run), "%s/run", self->root);
	snprintf(self->virsh, sizeof(self->virsh), "%s/virsh", self->root);
	mkdirs(self->root, "proc");
	mkdirs(self->root, "run");
	memset(long_arg, 'x', sizeof(long_arg) - 1);
	memcpy(long_arg, "memory-backend-ram,id=", 22);

	add_proc(self->root, 100, qemu_kv3);
	add_proc(self->root, 200, qemu_web);	/* the CID is past 8 KiB */
	add_proc(self->root, 300, qemu_cid5);
	add_proc(self->root, 301, qemu_cid5);
	add_proc(self->root, 400, sudo_cid6);
	add_proc(self->root, 401, qemu_cid6);
	add_proc(self->root, 500, bash);
	add_proc(self->root, 600, qemu_db);
	add_proc(self->root, 700, qemu_cf);
	add_proc(self->root, 800, qemu_nv);
	add_proc(self->root, 900, qemu_vx);
	add_proc(self->root, 910, qemu_dup);
	add_proc(self->root, 911, qemu_dup);
	add_proc(self->root, 920, qemu_bad);
	mkdirs(self->root, "proc/2");		/* a kernel thread: empty cmdline */
	put_text(self->root, "proc/2/cmdline", "");
	mkdirs(self->root, "proc/self");
	/* A command line beyond the 1 MiB limit: never read. */
	long_cmdline = malloc(VMFIND_CMDLINE_MAX + 100);
	ASSERT_NE(NULL, long_cmdline);
	memset(long_cmdline, 'a', VMFIND_CMDLINE_MAX + 100);
	mkdirs(self->root, "proc/999999");
	{
		char p[160];

		snprintf(p, sizeof(p), "%s/proc/999999/cmdline", self->root);
		put_file(p, long_cmdline, VMFIND_CMDLINE_MAX + 100);
	}
	free(long_cmdline);

	add_thread(self->root, 200, 200, "qemu-system-x86\n");
	add_thread(self->root, 200, 201, "CPU 0/KVM\n");
	add_thread(self->root, 200, 203, "CPU 1/KVM\n");
	add_thread(self->root, 200, 202, "CPU 10/KVM\n");
	add_thread(self->root, 200, 204, "IO mon_iothread\n");
	add_thread(self->root, 200, 205, "CPU 2/TCG\n");
	add_thread(self->root, 200, 206, "CPU 01/KVM\n");
	add_thread(self->root, 200, 207, "CPU 99999/KVM\n");
	add_thread(self->root, 200, 208, "CPU 3/KVMx\n");

	put_text(self->root, "run/web.pid", "200");
	put_text(self->root, "run/web.xml", status_xml_4);
	put_text(self->root, "run/dead.pid", "999\n");
	put_text(self->root, "run/dead.xml", status_xml_4);
	put_text(self->root, "run/notqemu.pid", "500\n");
	put_text(self->root, "run/cf.pid", "700\n");
	put_text(self->root, "run/cf.xml", "<domstatus><domain><devices><vsock model='virtio'>"
		 "<cid auto='no' address='10'/></vsock></devices></domain></domstatus>");
	put_text(self->root, "run/nv.pid", "800\n");
	put_text(self->root, "run/nv.xml", "<domstatus><domain><devices><disk/></devices>"
		 "</domain></domstatus>");
	put_text(self->root, "run/db.pid", "12ab\n");	/* garbage: found by name */
	put_text(self->root, "run/driver.pid", "500\n");	/* libvirt's own lock */
	put_text(self->root, "virsh", fake_virsh);

	vmfind_init(&self->vf);
	self->vf.proc = self->proc;
	self->vf.run_dir = self->run;
	self->vf.virsh = NULL;
}

FIXTURE_TEARDOWN(tree)
{
	nftw(self->root, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

/* ---- command lines ---- */

TEST_F(tree, cmdline_read_whole)
{
	struct vmfind_args a;

	ASSERT_EQ(0, vmfind_read_cmdline(&self->vf, 100, &a));
	EXPECT_EQ(5, a.argc);
	EXPECT_STREQ("qemu-system-x86_64", a.argv[0]);
	EXPECT_STREQ("vhost-vsock-pci,id=vsock0,guest-cid=3", a.argv[4]);
	EXPECT_EQ(NULL, a.argv[5]);
	EXPECT_TRUE(vmfind_args_is_qemu(&a));
	vmfind_args_free(&a);

	/* Past 8 KiB: the whole line, every argument. */
	ASSERT_EQ(0, vmfind_read_cmdline(&self->vf, 200, &a));
	EXPECT_LT(8192, a.len);
	EXPECT_EQ(8, a.argc);
	EXPECT_STREQ(LIBVIRT_VSOCK(4), a.argv[7]);
	vmfind_args_free(&a);

	EXPECT_EQ(-E2BIG, vmfind_read_cmdline(&self->vf, 999999, &a));
	EXPECT_EQ(-ENOENT, vmfind_read_cmdline(&self->vf, 2, &a));	/* kernel thread */
	EXPECT_EQ(-ENOENT, vmfind_read_cmdline(&self->vf, 12345, &a));
	EXPECT_EQ(-ENOENT, vmfind_read_cmdline(&self->vf, 0, &a));
	ASSERT_EQ(0, vmfind_read_cmdline(&self->vf, 500, &a));
	EXPECT_FALSE(vmfind_args_is_qemu(&a));
	vmfind_args_free(&a);
}

TEST_F(tree, cmdline_without_final_nul)
{
	struct vmfind_args a;
	char p[160];

	mkdirs(self->root, "proc/77");
	snprintf(p, sizeof(p), "%s/proc/77/cmdline", self->root);
	put_file(p, "kvm\0-device\0vhost-vsock-pci,guest-cid=77", 40);
	ASSERT_EQ(0, vmfind_read_cmdline(&self->vf, 77, &a));
	EXPECT_EQ(3, a.argc);
	EXPECT_STREQ("vhost-vsock-pci,guest-cid=77", a.argv[2]);
	EXPECT_TRUE(vmfind_args_is_qemu(&a));
	vmfind_args_free(&a);
}

TEST(device_key_value)
{
	uint32_t cid = 0;

	EXPECT_EQ(1, vmfind_device_cid("vhost-vsock-pci,id=vsock0,guest-cid=3", &cid));
	EXPECT_EQ(3, cid);
	EXPECT_EQ(1, vmfind_device_cid("vhost-vsock-device,guest-cid=0x10", &cid));
	EXPECT_EQ(16, cid);
	EXPECT_EQ(1, vmfind_device_cid("vhost-vsock-ccw,guest-cid=010", &cid));
	EXPECT_EQ(8, cid);	/* QEMU reads a leading 0 as octal */
	EXPECT_EQ(1, vmfind_device_cid("driver=vhost-vsock-pci,guest-cid=4294967294", &cid));
	EXPECT_EQ(4294967294u, cid);
	/* ",," is a comma inside a value: this id is "x,guest-cid=9". */
	EXPECT_EQ(1, vmfind_device_cid("vhost-vsock-pci,id=x,,guest-cid=9,guest-cid=4", &cid));
	EXPECT_EQ(4, cid);
	/* Not vsock devices, whatever their other keys say. */
	EXPECT_EQ(0, vmfind_device_cid("virtio-net-pci,guest-cid=3", &cid));
	EXPECT_EQ(0, vmfind_device_cid("vhost-user-vsock-pci,chardev=c", &cid));
	EXPECT_EQ(0, vmfind_device_cid("vhost-vsock-", &cid));
	EXPECT_EQ(0, vmfind_device_cid("", &cid));
}

TEST(device_key_value_bad)
{
	static const char *const bad[] = {
		"vhost-vsock-pci,guest-cid=0", "vhost-vsock-pci,guest-cid=2",
		"vhost-vsock-pci,guest-cid=4294967295", "vhost-vsock-pci,guest-cid=4294967296",
		"vhost-vsock-pci,guest-cid=-1", "vhost-vsock-pci,guest-cid=3x",
		"vhost-vsock-pci,guest-cid=", "vhost-vsock-pci,guest-cid= 3",
		"vhost-vsock-pci,guest-cid=18446744073709551619", "vhost-vsock-pci",
		"vhost-vsock-pci,guest-cid=3,guest-cid=4", "vhost-vsock-pci,guest-cid=0x",
		"vhost-vsock-pci,stray,guest-cid=3", "driver=a,driver=vhost-vsock-pci,guest-cid=3",
	};
	uint32_t cid = 1234;

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		EXPECT_EQ(-EINVAL, vmfind_device_cid(bad[i], &cid)) {
			TH_LOG("accepted '%s'", bad[i]);
		}
	}
	EXPECT_EQ(1234, cid);	/* never written on a refusal */
}

TEST(device_json)
{
	char deep[128] = "{\"driver\":\"vhost-vsock-pci\",\"a\":";
	uint32_t cid = 0;
	size_t l;

	EXPECT_EQ(1, vmfind_device_cid(LIBVIRT_VSOCK(3), &cid));
	EXPECT_EQ(3, cid);
	/* Other keys, nesting, strings holding "guest-cid": only the top level counts. */
	EXPECT_EQ(1, vmfind_device_cid(" { \"x\": {\"guest-cid\": 9, \"a\": [1,"
				       " {\"guest-cid\": 8}, true, null, -1.5e3]}, \"note\":"
				       " \"\\\"guest-cid\\\":7\", \"driver\" :"
				       " \"vhost-vsock-device\", \"guest-cid\" : 42 } ", &cid));
	EXPECT_EQ(42, cid);
	/* An escaped key is the same key. */
	EXPECT_EQ(1, vmfind_device_cid("{\"driver\":\"vhost-vsock-pci\",\"guest\\u002dcid\":5}",
				       &cid));
	EXPECT_EQ(5, cid);
	EXPECT_EQ(1, vmfind_device_cid("{\"driver\":\"vhost-vsock-pci\",\"guest-cid\":4294967294}",
				       &cid));
	EXPECT_EQ(4294967294u, cid);
	/* Nested 30 deep: read through (36 is refused, below). */
	l = strlen(deep);
	memset(deep + l, '[', 30);
	memset(deep + l + 30, ']', 30);
	strcpy(deep + l + 60, ",\"guest-cid\":6}");
	EXPECT_EQ(1, vmfind_device_cid(deep, &cid));
	EXPECT_EQ(6, cid);
	EXPECT_EQ(0, vmfind_device_cid("{\"driver\":\"virtio-net-pci\",\"guest-cid\":3}", &cid));
	EXPECT_EQ(0, vmfind_device_cid("{\"guest-cid\":3}", &cid));
	EXPECT_EQ(0, vmfind_device_cid("{}", &cid));
}

TEST(device_json_bad)
{
	static const char *const bad[] = {
		"{\"driver\":\"vhost-vsock-pci\",\"guest-cid\":0}",
		"{\"driver\":\"vhost-vsock-pci\",\"guest-cid\":2}",
		"{\"driver\":\"vhost-vsock-pci\",\"guest-cid\":4294967295}",
		"{\"driver\":\"vhost-vsock-pci\",\"guest-cid\":4294967296}",
		"{\"driver\":\"vhost-vsock-pci\",\"guest-cid\":-1}",
		"{\"driver\":\"vhost-vsock-pci\",\"guest-cid\":3x}",
		"{\"driver\":\"vhost-vsock-pci\",\"guest-cid\":3.0}",
		"{\"driver\":\"vhost-vsock-pci\",\"guest-cid\":3e0}",
		"{\"driver\":\"vhost-vsock-pci\",\"guest-cid\":03}",
		"{\"driver\":\"vhost-vsock-pci\",\"guest-cid\":\"3\"}",
		"{\"driver\":\"vhost-vsock-pci\",\"guest-cid\":true}",
		"{\"driver\":\"vhost-vsock-pci\",\"guest-cid\":99999999999999999999999999999999}",
		"{\"driver\":\"vhost-vsock-pci\"}",
		"{\"driver\":\"vhost-vsock-pci\",\"x\":{\"guest-cid\":9}}",
		"{\"driver\":\"vhost-vsock-pci\",\"guest-cid\":3,\"guest-cid\":3}",
		"{\"driver\":\"vhost-vsock-pci\",\"guest-cid\":3",
		"{\"driver\":\"vhost-vsock-pci\",\"guest-cid\":3} x",
		"{\"driver\":\"vhost-vsock-pci\",\"guest-cid\":3,}",
		"{\"driver\":vhost-vsock-pci,\"guest-cid\":3}",
		"{\"driver\":\"vhost-vsock-pci\" \"guest-cid\":3}",
		"{\"driver\":\"vhost-vsock-pci\",\"a\":\"\\q\",\"guest-cid\":3}",
		"{\"driver\":\"vhost-vsock-pci\",\"a\":[1,],\"guest-cid\":3}",
		"{\"driver\":\"vhost-vsock-pci\",\"a\":\"\x01\",\"guest-cid\":3}",
		/* Nested deeper than the reader goes. */
		"{\"driver\":\"vhost-vsock-pci\",\"a\":[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[["
			"]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]],\"guest-cid\":3}",
	};
	uint32_t cid = 1234;

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		EXPECT_EQ(-EINVAL, vmfind_device_cid(bad[i], &cid)) {
			TH_LOG("accepted '%s'", bad[i]);
		}
	}
	EXPECT_EQ(1234, cid);
}

TEST_F(tree, args_cids_and_name)
{
	struct vmfind_args a;
	uint32_t cids[4];
	char name[64];

	ASSERT_EQ(0, vmfind_read_cmdline(&self->vf, 200, &a));
	EXPECT_EQ(1, vmfind_args_cids(&a, cids, 4));
	EXPECT_EQ(4, cids[0]);
	EXPECT_EQ(1, vmfind_args_name(&a, name, sizeof(name)));
	EXPECT_STREQ("web", name);
	EXPECT_EQ(-EINVAL, vmfind_args_name(&a, name, 3));	/* does not fit */
	vmfind_args_free(&a);

	ASSERT_EQ(0, vmfind_read_cmdline(&self->vf, 600, &a));
	EXPECT_EQ(1, vmfind_args_name(&a, name, sizeof(name)));
	EXPECT_STREQ("db", name);	/* "-name db": the implied key */
	vmfind_args_free(&a);

	ASSERT_EQ(0, vmfind_read_cmdline(&self->vf, 500, &a));
	EXPECT_EQ(0, vmfind_args_cids(&a, cids, 4));	/* "guest-cid=3" not in a -device */
	EXPECT_EQ(0, vmfind_args_name(&a, name, sizeof(name)));
	vmfind_args_free(&a);

	ASSERT_EQ(0, vmfind_read_cmdline(&self->vf, 920, &a));
	EXPECT_EQ(-EINVAL, vmfind_args_cids(&a, cids, 4));
	vmfind_args_free(&a);

	{
		static const char *const two[] = { "qemu", "-name", "guest=a,,b,debug-threads=on",
			"-device", "vhost-vsock-pci,guest-cid=3", "-device",
			"vhost-vsock-pci,guest-cid=4", "-name", "guest=last", NULL };

		add_proc(self->root, 55, two);
		ASSERT_EQ(0, vmfind_read_cmdline(&self->vf, 55, &a));
		EXPECT_EQ(2, vmfind_args_cids(&a, cids, 4));
		EXPECT_EQ(3, cids[0]);
		EXPECT_EQ(4, cids[1]);
		EXPECT_EQ(1, vmfind_args_name(&a, name, sizeof(name)));
		EXPECT_STREQ("last", name);	/* QEMU keeps the last -name */
		a.argc = 3;
		EXPECT_EQ(1, vmfind_args_name(&a, name, sizeof(name)));
		EXPECT_STREQ("a,b", name);
		vmfind_args_free(&a);
	}
}

/* ---- by CID ---- */

TEST_F(tree, by_cid)
{
	struct vmfind_vm vm;

	EXPECT_EQ(VMFIND_OK, vmfind_by_cid(&self->vf, 3, &vm));
	EXPECT_EQ(100, vm.pid);	/* not bash's "echo guest-cid=3" */
	EXPECT_EQ(VMFIND_PID_CID, vm.pid_from);
	/* libvirt's JSON form, more than 8 KiB into the command line. */
	EXPECT_EQ(VMFIND_OK, vmfind_by_cid(&self->vf, 4, &vm));
	EXPECT_EQ(200, vm.pid);
	EXPECT_EQ(4, vm.cid);
	/* A "sudo qemu ..." parent repeats the arguments: the QEMU is the one. */
	EXPECT_EQ(VMFIND_OK, vmfind_by_cid(&self->vf, 6, &vm));
	EXPECT_EQ(401, vm.pid);

	EXPECT_EQ(VMFIND_E_SEVERAL, vmfind_by_cid(&self->vf, 5, &vm));
	EXPECT_EQ(-1, vm.pid);
	EXPECT_NE(NULL, strstr(self->vf.why, "2 processes claim vsock CID 5"));
	EXPECT_NE(NULL, strstr(self->vf.why, "300"));
	EXPECT_NE(NULL, strstr(self->vf.why, "301"));

	EXPECT_EQ(VMFIND_E_NONE, vmfind_by_cid(&self->vf, 7, &vm));
	EXPECT_EQ(-1, vm.pid);
	EXPECT_NE(NULL, strstr(self->vf.why, "guest-cid 7"));

	self->vf.proc = "/nonexistent/proc";
	EXPECT_EQ(VMFIND_E_SYS, vmfind_by_cid(&self->vf, 3, &vm));
}

/* ---- libvirt ---- */

TEST(xml_cid)
{
	static const char *const bad[] = {
		"<domain><devices><vsock model='virtio'></vsock></devices></domain>",
		"<domain><devices><vsock model='virtio'><cid auto='yes'/></vsock></devices>"
			"</domain>",
		"<vsock model='virtio'><cid auto='yes' address='abc'/></vsock>",
		"<vsock model='virtio'><cid auto='yes' address='2'/></vsock>",
		"<vsock model='virtio'><cid auto='yes' address='4294967295'/></vsock>",
		"<vsock model='virtio'><cid auto='yes' address='99999999999999999999'/></vsock>",
		"<vsock model='virtio'><cid auto='yes' address=''/></vsock>",
		"<vsock model='virtio'><cid auto='yes' address='-5'/></vsock>",
		"<vsock model='virtio'><cid address='5'",
		"<vsock model='virtio'><cid address='5'/>",
		"<vsock model='virtio'><cid address=5/></vsock>",
		"<vsock><cid address='5'/></vsock><vsock><cid address='6'/></vsock>",
		"<vsock model='virtio'/>",
		"<vsock model='virtio'></vsock><cid address='5'/>",
	};
	uint32_t cid = 0;
	const char *x;

	x = "<domain><devices><vsock model='virtio'><cid auto='yes' address='5'/></vsock>"
	    "</devices></domain>";
	EXPECT_EQ(VMFIND_OK, vmfind_xml_cid(x, strlen(x), &cid));
	EXPECT_EQ(5, cid);
	x = "<vsock model=\"virtio\">\n <cid auto = \"no\"\n address = \"4294967294\" />\n</vsock>";
	EXPECT_EQ(VMFIND_OK, vmfind_xml_cid(x, strlen(x), &cid));
	EXPECT_EQ(4294967294u, cid);
	x = "<domain><devices><vsockx/><disk/></devices></domain>";
	EXPECT_EQ(VMFIND_E_NO_VSOCK, vmfind_xml_cid(x, strlen(x), &cid));
	EXPECT_EQ(VMFIND_E_NO_VSOCK, vmfind_xml_cid("", 0, &cid));
	/* Only @len bytes count. */
	x = "<vsock><cid address='7'/></vsock>";
	EXPECT_EQ(VMFIND_E_MALFORMED, vmfind_xml_cid(x, strlen(x) - 8, &cid));
	cid = 1234;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		EXPECT_EQ(VMFIND_E_MALFORMED, vmfind_xml_cid(bad[i], strlen(bad[i]), &cid)) {
			TH_LOG("accepted '%s'", bad[i]);
		}
	}
	EXPECT_EQ(1234, cid);
}

TEST(domain_names)
{
	EXPECT_TRUE(vmfind_name_ok("web-1.example"));
	EXPECT_TRUE(vmfind_name_ok("a b"));
	EXPECT_FALSE(vmfind_name_ok(""));
	EXPECT_FALSE(vmfind_name_ok("."));
	EXPECT_FALSE(vmfind_name_ok(".."));
	EXPECT_FALSE(vmfind_name_ok("../etc/x"));
	EXPECT_FALSE(vmfind_name_ok("a\nb"));
}

TEST_F(tree, domain_by_pid_file)
{
	struct vmfind_vm vm;

	ASSERT_EQ(VMFIND_OK, vmfind_domain(&self->vf, "web", &vm));
	EXPECT_EQ(200, vm.pid);
	EXPECT_EQ(4, vm.cid);
	EXPECT_EQ(VMFIND_PID_PIDFILE, vm.pid_from);
	EXPECT_EQ(VMFIND_CID_STATUS_XML, vm.cid_from);
	EXPECT_STREQ("web", vm.name);
	/* Without a status XML (empty: not one), the command line gives the CID. */
	put_text(self->root, "run/web.xml", "");
	ASSERT_EQ(VMFIND_OK, vmfind_domain(&self->vf, "web", &vm));
	EXPECT_EQ(4, vm.cid);
	EXPECT_EQ(VMFIND_CID_CMDLINE, vm.cid_from);
}

TEST_F(tree, domain_by_name)
{
	struct vmfind_vm vm;

	/* db.pid is garbage: the QEMU that says -name db. */
	ASSERT_EQ(VMFIND_OK, vmfind_domain(&self->vf, "db", &vm));
	EXPECT_EQ(600, vm.pid);
	EXPECT_EQ(8, vm.cid);
	EXPECT_EQ(VMFIND_PID_NAME, vm.pid_from);
	EXPECT_EQ(VMFIND_CID_CMDLINE, vm.cid_from);
	/* No pid file at all. */
	ASSERT_EQ(VMFIND_OK, vmfind_domain(&self->vf, "vx", &vm));
	EXPECT_EQ(900, vm.pid);
	EXPECT_EQ(11, vm.cid);
	/* A pid file naming another domain's QEMU is not believed. */
	put_text(self->root, "run/vx.pid", "200\n");
	ASSERT_EQ(VMFIND_OK, vmfind_domain(&self->vf, "vx", &vm));
	EXPECT_EQ(900, vm.pid);
	EXPECT_EQ(VMFIND_PID_NAME, vm.pid_from);
	EXPECT_EQ(VMFIND_E_SEVERAL, vmfind_domain(&self->vf, "dup", &vm));
	EXPECT_EQ(-1, vm.pid);
}

TEST_F(tree, domain_errors)
{
	struct vmfind_vm vm;

	/* The pid file names a process that is gone; no virsh to ask. */
	EXPECT_EQ(VMFIND_E_NOT_FOUND, vmfind_domain(&self->vf, "dead", &vm));
	EXPECT_NE(NULL, strstr(self->vf.why, "process 999 is gone"));
	EXPECT_EQ(-1, vm.pid);
	EXPECT_EQ(VMFIND_E_NOT_FOUND, vmfind_domain(&self->vf, "notqemu", &vm));
	EXPECT_NE(NULL, strstr(self->vf.why, "process 500 is not a QEMU"));
	EXPECT_EQ(VMFIND_E_NOT_FOUND, vmfind_domain(&self->vf, "nosuch", &vm));
	EXPECT_NE(NULL, strstr(self->vf.why, "no running libvirt domain 'nosuch'"));

	EXPECT_EQ(VMFIND_E_CONFLICT, vmfind_domain(&self->vf, "cf", &vm));
	EXPECT_NE(NULL, strstr(self->vf.why, "libvirt says vsock CID 10"));
	EXPECT_NE(NULL, strstr(self->vf.why, "line 9"));
	EXPECT_EQ(VMFIND_E_NO_VSOCK, vmfind_domain(&self->vf, "nv", &vm));
	EXPECT_NE(NULL, strstr(self->vf.why, "has no vsock device"));
	EXPECT_EQ(VMFIND_E_MALFORMED, vmfind_domain(&self->vf, "bad", &vm));
	EXPECT_EQ(VMFIND_E_BAD_NAME, vmfind_domain(&self->vf, "../run/web", &vm));
	EXPECT_EQ(VMFIND_E_BAD_NAME, vmfind_domain(&self->vf, "", &vm));
	/* Status XML without vsock but a vsock on the command line: libvirt wins. */
	put_text(self->root, "run/web.xml", "<domstatus><domain/></domstatus>");
	EXPECT_EQ(VMFIND_E_NO_VSOCK, vmfind_domain(&self->vf, "web", &vm));
}

TEST_F(tree, domain_virsh)
{
	struct vmfind_vm vm;

	self->vf.virsh = self->virsh;
	/* Defined (virsh knows it) but not running. */
	EXPECT_EQ(VMFIND_E_NOT_RUNNING, vmfind_domain(&self->vf, "stopped", &vm));
	EXPECT_NE(NULL, strstr(self->vf.why, "'stopped' is not running"));
	EXPECT_EQ(VMFIND_E_NOT_RUNNING, vmfind_domain(&self->vf, "dead", &vm));
	EXPECT_NE(NULL, strstr(self->vf.why, "process 999 is gone"));
	/* Unknown to libvirt. */
	EXPECT_EQ(VMFIND_E_NO_DOMAIN, vmfind_domain(&self->vf, "nosuch", &vm));
	EXPECT_NE(NULL, strstr(self->vf.why, "no libvirt domain 'nosuch'"));
	/* Running, no status XML: the CID from virsh's live XML. */
	ASSERT_EQ(VMFIND_OK, vmfind_domain(&self->vf, "vx", &vm));
	EXPECT_EQ(11, vm.cid);
	EXPECT_EQ(VMFIND_CID_VIRSH, vm.cid_from);
	/* virsh fails for another reason: its message, not "unknown domain". */
	EXPECT_EQ(VMFIND_E_NOT_FOUND, vmfind_domain(&self->vf, "noconn", &vm));
	EXPECT_NE(NULL, strstr(self->vf.why, "virsh: error: failed to connect")) {
		TH_LOG("%s", self->vf.why);
	}
	/* A virsh that hangs is given up on. */
	self->vf.virsh_timeout_s = 1;
	EXPECT_EQ(VMFIND_E_NOT_FOUND, vmfind_domain(&self->vf, "hang", &vm));
	EXPECT_NE(NULL, strstr(self->vf.why, strerror(ETIMEDOUT))) {
		TH_LOG("%s", self->vf.why);
	}
	/* A virsh that is not installed. */
	self->vf.virsh = "/nonexistent/virsh";
	EXPECT_EQ(VMFIND_E_NOT_FOUND, vmfind_domain(&self->vf, "stopped", &vm));
}

TEST_F(tree, all_guests)
{
	struct vmfind_vm *vms;
	size_t nr, ok = 0;
	int seen_web = 0, seen_dead = 0, seen_plain = 0, seen_driver = 0, seen_bad = 0;

	ASSERT_EQ(0, vmfind_all(&self->vf, &vms, &nr));
	for (size_t i = 0; i < nr; i++) {
		struct vmfind_vm *v = &vms[i];

		if (!v->err)
			ok++;
		if (!strcmp(v->name, "web")) {
			seen_web++;
			EXPECT_EQ(0, v->err);
			EXPECT_EQ(200, v->pid);
			EXPECT_EQ(VMFIND_PID_PIDFILE, v->pid_from);
		}
		if (!strcmp(v->name, "dead")) {
			seen_dead++;
			EXPECT_EQ(VMFIND_E_NOT_FOUND, v->err);
		}
		if (!strcmp(v->name, "driver"))
			seen_driver++;
		if (v->pid == 100) {
			seen_plain++;
			EXPECT_EQ(3, v->cid);
			EXPECT_EQ(VMFIND_PID_CID, v->pid_from);
		}
		if (v->pid == 920) {
			seen_bad++;
			EXPECT_EQ(VMFIND_E_MALFORMED, v->err);
		}
		EXPECT_NE(500, v->pid);	/* bash */
		EXPECT_NE(400, v->pid);	/* sudo */
	}
	EXPECT_EQ(1, seen_web);		/* once: not again as a plain QEMU */
	EXPECT_EQ(1, seen_dead);
	EXPECT_EQ(0, seen_driver);
	EXPECT_EQ(1, seen_plain);
	EXPECT_EQ(1, seen_bad);
	/* web, db, cf? no: cf conflicts; usable: web, db, 100, 300, 301, 401, 900 */
	EXPECT_EQ(7, ok);
	free(vms);
}

/* ---- vCPU threads ---- */

TEST_F(tree, vcpu_threads)
{
	struct vmfind_vcpu *v;
	int n = vmfind_vcpus(&self->vf, 200, &v);

	ASSERT_EQ(3, n);
	EXPECT_EQ(0, v[0].index);
	EXPECT_EQ(201, v[0].tid);
	EXPECT_EQ(1, v[1].index);
	EXPECT_EQ(203, v[1].tid);
	EXPECT_EQ(10, v[2].index);
	EXPECT_EQ(202, v[2].tid);
	free(v);
	EXPECT_EQ(-ENOENT, vmfind_vcpus(&self->vf, 100, &v));	/* no task dir */
	EXPECT_EQ(NULL, v);
	EXPECT_EQ(-ENOENT, vmfind_vcpus(&self->vf, -1, &v));
}

TEST_HARNESS_MAIN
