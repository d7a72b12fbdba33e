#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// What a test run tells beyond passed and failed, for the summary `Tests/run.sh` prints at its
/// end: which real-server suites ran, failed for want of a program, or were skipped on request,
/// and notes such as which forms of the text kernels this processor ran. Each line goes to the
/// file named by `TETHER_TEST_REPORT` (nothing happens without it).
public enum TestReport {
    /// Adds one line to the report: `ran NAME`, `missing NAME`, `skipped NAME`, `skipped-root NAME`,
    /// `note TEXT`.
    public static func add(_ line: String) {
        guard let path = getenv("TETHER_TEST_REPORT") else { return }
        let fd = open(path, O_WRONLY | O_APPEND | O_CREAT, 0o644)
        guard fd >= 0 else { return }
        defer { close(fd) }
        let bytes = Array((line + "\n").utf8)
        _ = bytes.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
    }

    /// A note for the summary (written once per text).
    public static func note(_ text: String) {
        add("note \(text)")
    }
}
