internal import CTetherText

/// The process-wide choice of the text kernels' form (UTF-8 validation and JSON scanning, in
/// `CTetherText`). On x86-64 processors with AVX-512BW the 64-byte forms run by default, the
/// portable 16-byte forms (SSE2, NEON) everywhere else; both give the same results. No library
/// code reads the environment: a program that wants the portable forms (to compare the two, or to
/// rule the wide ones out) says so here, before it starts decoding.
public enum TextKernels {
    /// Whether the 64-byte forms may run where the processor has them (default true). Set it
    /// before decoding starts; a decode in flight keeps the form it began with.
    public static var allowsWideVectors: Bool {
        get { tether_wide_vectors() != 0 || tether_has_wide_vectors() == 0 }
        set { tether_allow_wide_vectors(newValue ? 1 : 0) }
    }

    /// Whether the 64-byte forms run now.
    public static var usesWideVectors: Bool { tether_wide_vectors() != 0 }
}
