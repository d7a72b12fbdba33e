// libFuzzer target: JSON values as hub payloads carry them. The input is checked as UTF-8 (the
// vector kernels against the standard library), by the C JSON kernels against the Swift
// reference (validating skip, string scans; cut where the first byte says), and, when it is one
// valid JSON value, decoded by the fast path and by Codable, which must agree, and rendered.
import FuzzSupport
import TetherSignalR

@c(LLVMFuzzerTestOneInput)
func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> Int32 {
    var input = FuzzInput(data, size)
    let cut = Int(input.byte())
    let bytes = input.rest()
    checkUTF8(bytes, from: cut % 17)
    checkJSONKernels(bytes, cut: cut)
    if let value = try? EncodedValue(json: bytes, maximumDepth: 16) {
        _ = try? value.decode([String: Int].self)
        _ = try? value.decode([String].self)
        if let rendered = try? CanonicalJSON.render(value) {
            // The rendering is itself a JSON value, and renders to itself.
            let again = try? EncodedValue(json: Array(rendered.utf8), maximumDepth: 17)
            require(again.flatMap { try? CanonicalJSON.render($0) } == rendered, "canonical JSON is not stable")
        }
        agree(value)
    }
    return 0
}
