// libFuzzer target: the HTTP/1.1 response parser (negotiate and the WebSocket opening
// handshake). The first byte picks the split and the request method. Invariants: any split
// gives the same response or the same error, at the end of input as well; bodies stay within
// the configured limit.
import FuzzSupport
import TetherHTTP

let limits = HTTPResponseParser.Configuration(maximumHeadSize: 1024, maximumHeaderCount: 16, maximumBodySize: 2048)

func run(_ pieces: [ArraySlice<UInt8>], method: String) -> Result<HTTPResponse?, HTTPError> {
    var parser = HTTPResponseParser(configuration: limits, requestMethod: method)
    for piece in pieces {
        parser.append(piece)
        do {
            if let response = try parser.response() { return .success(response) }
        } catch {
            return .failure(error)
        }
    }
    do {
        return .success(try parser.endOfInput())
    } catch {
        return .failure(error)
    }
}

@c(LLVMFuzzerTestOneInput)
func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> Int32 {
    var input = FuzzInput(data, size)
    let selector = input.byte()
    let method = selector & 0x80 == 0 ? "GET" : "HEAD"
    let stream = input.rest()
    let whole = run([stream[...]], method: method)
    let split = run(chunks(of: stream, seed: selector), method: method)
    require(whole == split, "a split of the stream parsed differently (seed \(selector))")
    if case .success(let response?) = whole {
        require(response.body.count <= limits.maximumBodySize, "a body over the limit")
    }
    return 0
}
