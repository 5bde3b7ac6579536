#!/bin/sh
# /init of the hutch VM guest (see integration/vm). It runs the integration
# suite against this kernel as root and as an unprivileged uid and reports
# over the serial console with @@HUTCH-VM ...@@ marker lines, which the
# harness on the host parses. It never decides pass or fail for the
# harness: the host reads every test's own verdict and exit status.
export PATH=/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin

# Stage 1, on the initramfs (rootfs). pivot_root(2) refuses to move rootfs,
# and hutch pivots into each sandbox's root, so the files move to a tmpfs
# that becomes the real root, as on an installed system.
if [ ! -e /.stage2 ]; then
	mount -t proc proc /proc
	mount -t tmpfs -o mode=0755 root /newroot
	for e in /*; do
		case "$e" in /newroot | /proc) ;; *) cp -a "$e" /newroot/ ;; esac
	done
	mkdir -p /newroot/proc /newroot/newroot
	: >/newroot/.stage2
	umount /proc
	exec switch_root /newroot /init
fi

# Stage 2: pid 1 on a tmpfs root.
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
mkdir -p /dev/pts /dev/shm
mount -t devpts -o mode=0620,ptmxmode=0666 devpts /dev/pts
mount -t tmpfs -o mode=1777 shm /dev/shm
mount -t securityfs securityfs /sys/kernel/security 2>/dev/null
# Pure cgroup v2, as systemd mounts it on current distributions.
mount -t cgroup2 -o nsdelegate cgroup2 /sys/fs/cgroup
mount -t tmpfs -o mode=1777 tmp /tmp
mount -t tmpfs -o mode=1777 vartmp /var/tmp
mount -t tmpfs -o mode=0755 run /run
hostname hutch-vm
ip link set lo up

cat >/etc/passwd <<'EOF'
root:x:0:0:root:/root:/bin/sh
nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin
EOF
cat >/etc/group <<'EOF'
root:x:0:
nogroup:x:65534:
EOF
echo 'root:*:20000:0:99999:7:::' >/etc/shadow
chmod 0600 /etc/shadow
echo hutch-vm >/etc/hostname

. /etc/hutch-vm.conf

echo
echo "@@HUTCH-VM BOOTED@@"
hutch-vm-guest probe
# Kernel messages (an OOM kill, a refused fork) must not cut into the
# test output on the console; they are summarised after the suite.
echo 1 >/proc/sys/kernel/printk
dmesg -c >/dev/null

set -o pipefail
total_pass=0
total_fail=0
total_skip=0
summary=""
for u in $USERS; do
	label=${u%%:*}
	uid=${u#*:}
	pass=0 fail=0 skip=0
	if [ "$uid" = 0 ]; then as="" home=/root; else as="hutch-vm-guest as $uid $uid" home=/nonexistent; fi
	for t in $TESTS; do
		echo
		echo "@@HUTCH-VM BEGIN user=$label test=$t@@"
		start=$(date +%s)
		cd /tmp
		timeout -s KILL $((TEST_TIMEOUT + 30)) \
			env -i PATH="$PATH" HOME="$home" HUTCH_BIN=/usr/local/bin/hutch $HUTCH_VM_ENV \
			$as /usr/local/bin/integration.test -test.run "^$t\$" -test.v -test.short -test.count=1 \
			-test.timeout="${TEST_TIMEOUT}s" 2>&1 </dev/null | tee /run/test.out
		rc=$?
		cd /
		secs=$(($(date +%s) - start))
		if [ $rc = 0 ] && grep -q "^--- PASS: $t " /run/test.out; then
			pass=$((pass + 1))
		elif [ $rc = 0 ] && grep -q "^--- SKIP: $t " /run/test.out; then
			skip=$((skip + 1))
		else
			fail=$((fail + 1))
		fi
		echo
		echo "@@HUTCH-VM END user=$label test=$t rc=$rc secs=$secs@@"
	done
	summary="$summary $label=$pass/$fail/$skip"
	total_pass=$((total_pass + pass))
	total_fail=$((total_fail + fail))
	total_skip=$((total_skip + skip))
done

echo
echo "@@HUTCH-VM DMESG@@"
# What the kernel said during the suite, most frequent first.
dmesg | sed 's/^\[[ 0-9.]*\] //' | sort | uniq -c | sort -rn | head -n 40
echo
echo "@@HUTCH-VM DONE passed=$total_pass failed=$total_fail skipped=$total_skip$summary@@"
sync
poweroff -f
