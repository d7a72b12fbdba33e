internal import CTetherText

/// The process-wide choice of the text kernels' form (UTF-8 validation and JSON scanning, in
/// `CTetherText`). The widest form the processor has runs by default: on x86-64 the 64-byte form
/// with AVX-512BW, else the 32-byte form with AVX2, else the portable 16-byte form (SSE2; NEON on
/// ARM64). All give the same results. No library code reads the environment: a program that
/// wants a narrower form (to compare them, or to rule one out) says so here, before it starts
/// decoding.
public enum TextKernels {
    /// A form of the kernels, narrowest first.
    public enum Form: Int, Sendable, CaseIterable, CustomStringConvertible {
        /// 16-byte vectors: SSE2 on x86-64, NEON on ARM64. Every processor has it.
        case portable = 0
        /// 32-byte vectors: x86-64 with AVX2 (and BMI1, BMI2).
        case avx2 = 1
        /// 64-byte vectors: x86-64 with AVX-512 F, BW and VL.
        case avx512 = 2

        public var description: String {
            switch self {
            case .portable: "portable"
            case .avx2: "avx2"
            case .avx512: "avx512"
            }
        }
    }

    /// The widest form this processor and operating system can run.
    public static var widestForm: Form { Form(rawValue: Int(tether_best_vector_form())) ?? .portable }

    /// The form the kernels run in. Setting it narrows the choice for the whole process (a form
    /// the processor lacks gives the widest it has); set it before decoding starts, as a decode in
    /// flight keeps the form it began with.
    public static var form: Form {
        get { Form(rawValue: Int(tether_vector_form())) ?? .portable }
        set { tether_use_vector_form(Int32(newValue.rawValue)) }
    }

    /// The forms this processor runs, narrowest first: `.portable` up to `widestForm`.
    public static var runnableForms: [Form] { Form.allCases.filter { $0.rawValue <= widestForm.rawValue } }

    /// Whether a form wider than the portable one may run where the processor has one (default
    /// true): false is `form = .portable`, true is `form = widestForm`.
    public static var allowsWideVectors: Bool {
        get { form == widestForm }
        set { form = newValue ? widestForm : .portable }
    }

    /// Whether a form wider than the portable one runs now.
    public static var usesWideVectors: Bool { form != .portable }
}
