// SPDX-License-Identifier: (MIT OR Apache-2.0)
//
// The cell incubator's fast path: an XDP program that sends each frame to
// its cell's interface through a DEVMAP, choosing the cell exactly as the
// user-space path does (sluice-wire's FlowKey::symmetric_hash, the top 12
// bits of its low half as the slot, the slot's owner from CellTable).
//
// It parses only what it can hash exactly as the user-space decoder does:
// Ethernet, up to two 802.1Q/802.1ad tags, IPv4, IPv6 with its common
// extension headers, and the ports of TCP, UDP and SCTP. Every other frame
// (tunnels, MPLS, PPPoE, LLC, frames the decoder would refuse) goes to the
// user-space path with XDP_PASS, counted by reason, so the two paths never
// disagree on a frame both could take.
//
// Inline (the loader sets inline_out), each frame taken goes to its cell
// and to OUT: XDP copies a frame only by a broadcast redirect, to every
// interface of a device map, so each cell has a device map of two, {the
// cell, OUT}, in an array of maps. What it passes, the user-space path
// sends to the cell and OUT.
//
// Built with Debian's clang:
//   ./build.sh   (clang -O2 -g -target bpfel -mcpu=v3, then llvm-strip -g)
// The object is checked in beside this file; a test rebuilds it and
// compares the instructions.

#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <bpf/bpf_helpers.h>

#define SLOTS 4096
#define MAX_CELLS 4096

// Why a frame went to the user-space path (index into `stats`). The
// loader and the test name them in this order.
enum reason {
	PASS_SHORT = 0,       // shorter than an Ethernet header
	PASS_NOT_IP,          // not IPv4 or IPv6 (ARP, LLC, MPLS, PPPoE, ...)
	PASS_VLAN_DEPTH,      // more than two VLAN tags
	PASS_IP_HEADER,       // IP header cut short or malformed
	PASS_TUNNEL,          // IP in IP, GRE, VXLAN, VXLAN-GPE, Geneve, GTP-U
	PASS_IPV6_EXT,        // IPv6 extension chain unusual, long or cut short
	PASS_TCP_HEADER,      // TCP data offset below 5
	PASS_NO_CELL,         // the slot's cell has no interface in the DEVMAP
	PASS_REASONS,
	// Not reasons: fragment and redirect counts in the same map.
	STAT_RESOLVED = PASS_REASONS,
	STAT_UNRESOLVED,
	STAT_REDIRECT_FAILURES,
	STATS,
};

// Set by the loader before the program is loaded (read-only data): the
// verifier then knows their values and drops the branches they turn off,
// so neither costs anything per frame.
const volatile __u32 ip_pair = 0;   // 1: hash the addresses alone (--hash ip-pair)
const volatile __u32 test_mode = 0; // 1: write the decision over the Ethernet header (tests)
const volatile __u32 inline_out = 0; // 1: inline, every frame taken to its cell and OUT (--inline)

struct cell_counts {
	__u64 packets;
	__u64 bytes;
};

// The addresses as two little-endian words each, as the hash reads them.
struct frag_key {
	__u64 src[2];
	__u64 dst[2];
	__u32 id;
	__u16 vlan;
	__u8 proto;
	__u8 version;
};

struct frag_ports {
	__u16 src_port;
	__u16 dst_port;
};

// Each slot's cell (CellTable::owners).
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, SLOTS);
	__type(key, __u32);
	__type(value, __u32);
} slots SEC(".maps");

// Each cell's interface.
struct {
	__uint(type, BPF_MAP_TYPE_DEVMAP);
	__uint(max_entries, MAX_CELLS);
	__type(key, __u32);
	__type(value, __u32);
} cells SEC(".maps");

// Inline: each cell's pair {the cell's interface, OUT}. XDP cannot copy a
// frame but by a broadcast redirect, which sends it to every interface of
// a device map: one such map per cell, filled by the loader, looked up by
// the cell's index. Its value has the size of the kernel's struct
// bpf_devmap_val (an interface and an optional program), as the loader
// fills device maps (declared as a plain word: a struct used nowhere else
// would reach the BTF only as a forward declaration, which has no size).
struct cell_and_out {
	__uint(type, BPF_MAP_TYPE_DEVMAP);
	__uint(max_entries, 2);
	__type(key, __u32);
	__type(value, __u64);
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY_OF_MAPS);
	__uint(max_entries, MAX_CELLS);
	__type(key, __u32);
	__array(values, struct cell_and_out);
} inline_cells SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, MAX_CELLS);
	__type(key, __u32);
	__type(value, struct cell_counts);
} cell_counts SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, STATS);
	__type(key, __u32);
	__type(value, __u64);
} stats SEC(".maps");

// First fragments' ports, as sluice-flow's FragmentResolver keeps them
// (there a direct-mapped table of 65,536 entries, here an LRU hash of as
// many: they differ only in which entry an overflow evicts).
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 65536);
	__type(key, struct frag_key);
	__type(value, struct frag_ports);
} fragments SEC(".maps");

#define K0 0xa0761d6478bd642fULL
#define K1 0xe7037ed1a0b428dbULL
#define K2 0x8ebc6af09c88c6e3ULL
#define K3 0x589965cc75374cc3ULL

// The low and high halves of the 128-bit product, folded (wyhash's mum):
// BPF has no 64x64->128 multiply, so the high half is built from 32-bit
// halves (neither t nor w can overflow: (2^32-1)^2 + 2^32-1 < 2^64); the
// low half is the 64-bit product itself.
static __always_inline __u64 fold_mul(__u64 a, __u64 b)
{
	__u64 al = (__u32)a, ah = a >> 32;
	__u64 bl = (__u32)b, bh = b >> 32;
	__u64 ll = al * bl, lh = al * bh, hl = ah * bl, hh = ah * bh;
	__u64 t = lh + (ll >> 32);
	__u64 w = (__u32)t + hl;
	__u64 hi = hh + (t >> 32) + (w >> 32);
	return (a * b) ^ hi;
}

// Loads from the packet, in one instruction each: the program is built for
// bpfel, so a word load is little-endian, as sluice-wire reads addresses;
// the kernel allows unaligned packet loads where the CPU does.
typedef __u64 __attribute__((may_alias)) u64_any;
typedef __u32 __attribute__((may_alias)) u32_any;
typedef __u16 __attribute__((may_alias)) u16_any;

static __always_inline __u64 ld64(const __u8 *p)
{
	return *(const u64_any *)p;
}

static __always_inline __u32 ld32(const __u8 *p)
{
	return *(const u32_any *)p;
}

// A big-endian 16-bit field, in host order.
static __always_inline __u16 be16(const __u8 *p)
{
	return __builtin_bswap16(*(const u16_any *)p);
}

// An endpoint's hash is fold_mul(address_hash ^ port, K2); the address's
// part is computed where the address is read, so that for IPv4 (a single
// word, the rest zero) the compiler folds what is constant.
static __always_inline __u64 address_hash(__u64 lo, __u64 hi)
{
	return fold_mul(lo ^ K0, hi ^ K1);
}

static __always_inline void count(__u32 stat)
{
	__u64 *n = bpf_map_lookup_elem(&stats, &stat);
	if (n)
		*n += 1;
}

static __always_inline void mark(__u8 *data, __u8 *end, __u32 cell, __u16 reason, __u64 hash)
{
	if (!test_mode || data + 14 > end)
		return;
	__builtin_memcpy(data, &cell, 4);
	__builtin_memcpy(data + 4, &reason, 2);
	__builtin_memcpy(data + 6, &hash, 8);
}

static __always_inline int pass(__u8 *data, __u8 *end, __u16 reason)
{
	count(reason);
	mark(data, end, 0xffffffff, reason, 0);
	return XDP_PASS;
}

#define VXLAN_PORT 4789
#define VXLAN_GPE_PORT 4790
#define GENEVE_PORT 6081
#define GTPU_PORT 2152

SEC("xdp")
int balance(struct xdp_md *ctx)
{
	__u8 *data = (void *)(long)ctx->data;
	__u8 *end = (void *)(long)ctx->data_end;
	// The addresses as the hash reads them (IPv4's in the low word, the
	// rest zero), and what else the fragment key needs.
	__u64 src_lo, src_hi = 0, dst_lo, dst_hi = 0, src_addr, dst_addr;
	__u32 id = 0;
	__u16 vlan = 0;
	__u8 proto;
	__u16 src_port = 0, dst_port = 0;
	// 0: not a fragment, 1: a first fragment, 2: a later one.
	int fragment = 0;
	__u8 *p = data;

	if (p + 14 > end)
		return pass(data, end, PASS_SHORT);
	__u16 ethertype = be16(p + 12);
	p += 14;
#pragma unroll
	for (int i = 0; i < 3; i++) {
		if (ethertype != 0x8100 && ethertype != 0x88a8 && ethertype != 0x9100)
			break;
		if (i == 2)
			return pass(data, end, PASS_VLAN_DEPTH);
		if (p + 4 > end)
			return pass(data, end, PASS_IP_HEADER);
		vlan = be16(p) & 0x0fff;
		ethertype = be16(p + 2);
		p += 4;
	}
	if (ethertype != 0x0800 && ethertype != 0x86dd)
		return pass(data, end, PASS_NOT_IP);
	if (p + 1 > end)
		return pass(data, end, PASS_IP_HEADER);

	__u8 *l4;
	__u8 *l4_end;
	__u8 version = p[0] >> 4;
	if (version == 4) {
		if (p + 20 > end)
			return pass(data, end, PASS_IP_HEADER);
		__u32 header_len = (p[0] & 0x0f) * 4;
		__u32 total = be16(p + 2);
		__u32 captured = end - p;
		if (header_len < 20 || captured < header_len)
			return pass(data, end, PASS_IP_HEADER);
		if (total == 0)
			total = captured;
		if (total < header_len)
			return pass(data, end, PASS_IP_HEADER);
		src_lo = ld32(p + 12);
		dst_lo = ld32(p + 16);
		src_addr = address_hash(src_lo, 0);
		dst_addr = address_hash(dst_lo, 0);
		proto = p[9];
		id = be16(p + 4);
		__u16 flags_offset = be16(p + 6);
		if (flags_offset & 0x1fff)
			fragment = 2;
		else if (flags_offset & 0x2000)
			fragment = 1;
		l4 = p + (header_len & 0x3c);
		if (total > captured)
			total = captured;
		l4_end = p + (total & 0xffff);
	} else if (version == 6) {
		if (p + 40 > end)
			return pass(data, end, PASS_IP_HEADER);
		__u32 payload_len = be16(p + 4);
		if (payload_len == 0)
			return pass(data, end, PASS_IPV6_EXT);
		src_lo = ld64(p + 8);
		src_hi = ld64(p + 16);
		dst_lo = ld64(p + 24);
		dst_hi = ld64(p + 32);
		src_addr = address_hash(src_lo, src_hi);
		dst_addr = address_hash(dst_lo, dst_hi);
		__u8 next = p[6];
		l4_end = p + 40 + payload_len;
		if (l4_end > end)
			l4_end = end;
		l4 = p + 40;
		int seen_fragment = 0;
#pragma unroll
		for (int i = 0; i < 6; i++) {
			__u32 len;
			if (next == 0) {
				if (i != 0)
					return pass(data, end, PASS_IPV6_EXT);
			} else if (next != 43 && next != 60 && next != 44 && next != 51) {
				break;
			}
			if (i == 5 || seen_fragment == 2)
				return pass(data, end, PASS_IPV6_EXT);
			if (l4 + 8 > end || l4 + 8 > l4_end)
				return pass(data, end, PASS_IPV6_EXT);
			if (next == 44) {
				__u16 offset_more = be16(l4 + 2);
				len = 8;
				if (offset_more & 0xfff9) {
					if (seen_fragment)
						return pass(data, end, PASS_IPV6_EXT);
					id = __builtin_bswap32(ld32(l4 + 4));
					if (offset_more & 0xfff8) {
						// A later fragment: what follows is data.
						fragment = 2;
						seen_fragment = 2;
						next = l4[0];
						l4 += 8;
						break;
					}
					fragment = 1;
					seen_fragment = 1;
				}
			} else if (next == 51) {
				len = ((__u32)l4[1] + 2) * 4;
			} else {
				len = ((__u32)l4[1] + 1) * 8;
			}
			next = l4[0];
			l4 += len & 0x7ff;
			if (l4 > l4_end)
				return pass(data, end, PASS_IPV6_EXT);
		}
		if (next == 135 || next == 139 || next == 140 || next == 253 || next == 254)
			return pass(data, end, PASS_IPV6_EXT);
		proto = next;
	} else {
		return pass(data, end, PASS_IP_HEADER);
	}
	struct frag_key key;
	if (fragment) {
		key.src[0] = src_lo;
		key.src[1] = src_hi;
		key.dst[0] = dst_lo;
		key.dst[1] = dst_hi;
		key.id = id;
		key.vlan = vlan;
		key.proto = proto;
		key.version = version;
	}

	if (fragment != 2) {
		if (proto == 4 || proto == 41 || proto == 47)
			return pass(data, end, PASS_TUNNEL);
		if (proto == 6 || proto == 17 || proto == 132) {
			if (l4 + 4 <= l4_end && l4 + 4 <= end) {
				src_port = be16(l4);
				dst_port = be16(l4 + 2);
			}
			if (proto == 6 && l4 + 20 <= l4_end && l4 + 20 <= end && (l4[12] >> 4) < 5)
				return pass(data, end, PASS_TCP_HEADER);
			if (proto == 17 && l4 + 8 <= l4_end &&
			    (dst_port == VXLAN_PORT || dst_port == VXLAN_GPE_PORT ||
			     dst_port == GENEVE_PORT || dst_port == GTPU_PORT || src_port == GTPU_PORT))
				return pass(data, end, PASS_TUNNEL);
		}
		if (fragment == 1) {
			struct frag_ports ports = { src_port, dst_port };
			bpf_map_update_elem(&fragments, &key, &ports, BPF_ANY);
		}
	} else {
		struct frag_ports *ports = bpf_map_lookup_elem(&fragments, &key);
		if (ports) {
			src_port = ports->src_port;
			dst_port = ports->dst_port;
			count(STAT_RESOLVED);
		} else {
			count(STAT_UNRESOLVED);
		}
	}

	__u64 shared = (__u64)proto | (__u64)version << 8 | (__u64)vlan << 16;
	if (ip_pair) {
		src_port = 0;
		dst_port = 0;
		shared = (__u64)version << 8 | (__u64)vlan << 16;
	}
	__u64 a = fold_mul(src_addr ^ src_port, K2);
	__u64 b = fold_mul(dst_addr ^ dst_port, K2);
	__u64 hash = fold_mul((a + b) ^ K2, shared ^ K3);
	__u32 slot = ((__u32)hash) >> 20;
	__u32 *cell = bpf_map_lookup_elem(&slots, &slot);
	if (!cell)
		return pass(data, end, PASS_NO_CELL);
	__u32 c = *cell;
	struct cell_counts *counts = bpf_map_lookup_elem(&cell_counts, &c);
	if (counts) {
		counts->packets += 1;
		counts->bytes += (__u64)(end - data);
	}
	mark(data, end, c, 0xffff, hash);
	long action;
	if (inline_out) {
		// A broadcast redirect returns XDP_REDIRECT whatever the map
		// holds: a cell without its pair is passed to the user-space
		// path, which sends it to the cell and OUT.
		void *both = bpf_map_lookup_elem(&inline_cells, &c);
		if (both)
			action = bpf_redirect_map(both, 0, BPF_F_BROADCAST);
		else
			action = XDP_PASS;
	} else {
		action = bpf_redirect_map(&cells, c, XDP_PASS);
	}
	if (action != XDP_REDIRECT) {
		count(STAT_REDIRECT_FAILURES);
	}
	return action;
}

char LICENSE[] SEC("license") = "Dual MIT/GPL";
