// SPDX-License-Identifier: GPL-2.0
/*
 * The names the analysis prints (analyze.h): its components' and the
 * VM exit reasons' it knows, and which exit is a halt.  A leaf: the
 * engine (analyze.c) and its input (analyze_in.c) call it.
 */
#include <stddef.h>

#include "analyze.h"

static const char *const comp_names[HGA_NR_COMP] = {
	[HGA_C_GUEST] = "guest",
	[HGA_C_EXIT] = "exits",
	[HGA_C_PREEMPTED] = "preempted",
	[HGA_C_HOST_BLOCKED] = "host_blocked",
	[HGA_C_HALTED] = "halted",
	[HGA_C_DISRUPTED] = "disrupted",
	[HGA_C_UNKNOWN] = "unknown",
};

const char *hga_comp_name(enum hga_comp c)
{
	return (unsigned int)c < HGA_NR_COMP ? comp_names[c] : "?";
}

/* The basic exit reasons of Intel's SDM (appendix C) and AMD's APM (vol. 2, app. C) seen most. */
static const struct {
	uint32_t isa, reason;
	const char *name;
} exit_names[] = {
	{ HGA_ISA_VMX, 0, "EXCEPTION_NMI" },
	{ HGA_ISA_VMX, 1, "EXTERNAL_INTERRUPT" },
	{ HGA_ISA_VMX, 7, "INTERRUPT_WINDOW" },
	{ HGA_ISA_VMX, 10, "CPUID" },
	{ HGA_ISA_VMX, 12, "HLT" },
	{ HGA_ISA_VMX, 18, "VMCALL" },
	{ HGA_ISA_VMX, 28, "CR_ACCESS" },
	{ HGA_ISA_VMX, 30, "IO_INSTRUCTION" },
	{ HGA_ISA_VMX, 31, "MSR_READ" },
	{ HGA_ISA_VMX, 32, "MSR_WRITE" },
	{ HGA_ISA_VMX, 40, "PAUSE_INSTRUCTION" },
	{ HGA_ISA_VMX, 44, "APIC_ACCESS" },
	{ HGA_ISA_VMX, 48, "EPT_VIOLATION" },
	{ HGA_ISA_VMX, 49, "EPT_MISCONFIG" },
	{ HGA_ISA_VMX, 52, "PREEMPTION_TIMER" },
	{ HGA_ISA_SVM, 0x060, "INTR" },
	{ HGA_ISA_SVM, 0x064, "VINTR" },
	{ HGA_ISA_SVM, 0x072, "CPUID" },
	{ HGA_ISA_SVM, 0x078, "HLT" },
	{ HGA_ISA_SVM, 0x07b, "IOIO" },
	{ HGA_ISA_SVM, 0x07c, "MSR" },
	{ HGA_ISA_SVM, 0x081, "VMMCALL" },
	{ HGA_ISA_SVM, 0x400, "NPF" },
};

const char *hga_exit_name(uint32_t isa, uint32_t reason)
{
	size_t i;

	for (i = 0; i < sizeof(exit_names) / sizeof(exit_names[0]); i++)
		if (exit_names[i].isa == isa && exit_names[i].reason == reason)
			return exit_names[i].name;
	return NULL;
}

bool hga_exit_is_hlt(uint32_t isa, uint32_t reason)
{
	return (isa == HGA_ISA_VMX && reason == 12) || (isa == HGA_ISA_SVM && reason == 0x078);
}
