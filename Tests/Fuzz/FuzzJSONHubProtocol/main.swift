// libFuzzer target: the JSON hub protocol's parser. The first byte picks the split of the
// stream; the rest is the stream. Invariants: checkHubProtocol (FuzzSupport).
import FuzzSupport
import TetherSignalR

@c(LLVMFuzzerTestOneInput)
func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> Int32 {
    var input = FuzzInput(data, size)
    let seed = input.byte()
    checkHubProtocol(JSONHubProtocol(maximumMessageSize: 4096, maximumDepth: 16), input.rest(), seed: seed)
    return 0
}
