import Testing

@testable import tether

/// `tether decode`: the exact output contract, for every chunk size.
struct DecodeCommandTests {
    func run(
        _ format: DecodeCommand.Format,
        _ input: [UInt8],
        chunk: Int = DecodeCommand.defaultChunkSize
    ) -> (lines: [String], status: Int32) {
        var lines: [String] = []
        let status = DecodeCommand(format: format, chunkSize: chunk).run(input: input) { lines.append($0) }
        return (lines, status)
    }

    /// Runs with several chunk sizes and checks that they all print the same.
    func runAllChunkings(_ format: DecodeCommand.Format, _ input: [UInt8]) -> (lines: [String], status: Int32) {
        let reference = run(format, input)
        for chunk in [1, 2, 3, 7, 64, 1000] {
            let other = run(format, input, chunk: chunk)
            #expect(other.lines == reference.lines, "chunk \(chunk)")
            #expect(other.status == reference.status, "chunk \(chunk)")
        }
        return reference
    }

    @Test func signalRJSON() {
        let input = Array(
            """
            {"type":1,"headers":{"b":"2","a":"1"},"invocationId":"9","target":"Send","arguments":[1, {"x" : [true,null]}],"streamIds":["s"]}\u{1E}\
            {"type":99,"unknown":1}\u{1E}{"type":3,"invocationId":"1"}\u{1E}{"type":3,"invocationId":"2","result":null}\u{1E}\
            {"type":7,"allowReconnect":false}\u{1E}{"type":9,"sequenceId":12}\u{1E}
            """.utf8
        )
        let result = runAllChunkings(.signalRJSON, input)
        #expect(result.status == 0)
        #expect(
            result.lines == [
                #"{"type":1,"headers":{"a":"1","b":"2"},"invocationId":"9","target":"Send","arguments":[1,{"x":[true,null]}],"streamIds":["s"]}"#,
                #"{"type":3,"invocationId":"1"}"#,
                #"{"type":3,"invocationId":"2","result":null}"#,
                #"{"type":7}"#,
                #"{"type":9,"sequenceId":12}"#,
            ]
        )
    }

    @Test func signalRJSONErrorsStopAtTheFirstOne() {
        let input =
            Array(#"{"type":6}"#.utf8) + [0x1E] + Array(#"{"type":1}"#.utf8) + [0x1E] + Array(#"{"type":6}"#.utf8) + [
                0x1E
            ]
        let result = runAllChunkings(.signalRJSON, input)
        #expect(result.status == 1)
        #expect(result.lines == [#"{"type":6}"#, #"{"error":"Missing required property 'target'."}"#])
        let incomplete = runAllChunkings(.signalRJSON, Array(#"{"type":6}"#.utf8) + [0x1E] + Array(#"{"type":"#.utf8))
        #expect(incomplete.status == 1)
        #expect(incomplete.lines == [#"{"type":6}"#, #"{"error":"Message is incomplete."}"#])
    }

    @Test func signalRMessagePackMapsValuesToJSON() {
        // Invocation with arguments: bin, ext, timestamp, float32, a map with an integer key.
        let body: [UInt8] = [
            0x96, 0x01, 0x80, 0xc0, 0xa1, 0x54,
            0x95,
            0xc4, 0x03, 0x01, 0x02, 0x03,
            0xd4, 0x05, 0xaa,
            0xd6, 0xff, 0x00, 0x00, 0x00, 0x01,
            0xca, 0x3f, 0xc0, 0x00, 0x00,
            0x82, 0x01, 0xa1, 0x78, 0xa1, 0x6b, 0x90,
            0x90,
        ]
        let input = [UInt8(body.count)] + body + [0x0a, 0x95, 0x03, 0xcc, 0x80, 0xa1, 0x31, 0x03, 0xa2, 0x68, 0x69]
        let result = runAllChunkings(.signalRMessagePack, input)
        #expect(result.status == 0)
        #expect(
            result.lines == [
                #"{"type":1,"target":"T","arguments":["AQID",{"ext":5,"data":"qg=="},{"timestamp":1,"nanoseconds":0},1.5,{"1":"x","k":[]}]}"#,
                #"{"type":3,"invocationId":"1","result":"hi"}"#,
            ]
        )
        let truncated = runAllChunkings(.signalRMessagePack, Array(input.dropLast()))
        #expect(truncated.lines.last == #"{"error":"Message is incomplete."}"#)
        #expect(truncated.status == 1)
    }

    @Test func signalRKeySetNestedTooDeeplyAreAnError() {
        // A Ping, then an invocation whose argument nests maps as keys of maps six levels deep:
        // rendering grows twofold per level, so it is refused rather than printed.
        let argument: [UInt8] =
            Array(repeating: 0x81, count: 6) + [0xa1, 0x61, 0x00] + Array(repeating: 0x00, count: 5)
        let body: [UInt8] = [0x95, 0x01, 0x80, 0xc0, 0xa1, 0x54, 0x91] + argument
        let input: [UInt8] = [0x02, 0x91, 0x06] + [UInt8(body.count)] + body
        let result = runAllChunkings(.signalRMessagePack, input)
        #expect(
            result.lines == [
                #"{"type":6}"#,
                #"{"error":"Map keys that are maps or arrays are nested too deeply to render as JSON."}"#,
            ]
        )
        #expect(result.status == 1)
    }

    @Test func handshakes() {
        let requests = runAllChunkings(
            .signalRHandshakeRequest,
            Array(#"{"protocol":"json","version":1}"#.utf8) + [0x1E]
        )
        #expect(requests.lines == [#"{"protocol":"json","version":1}"#])
        #expect(requests.status == 0)
        let responses = runAllChunkings(
            .signalRHandshakeResponse,
            Array(#"{}"#.utf8) + [0x1E] + Array(#"{"error":"nope","minorVersion":3}"#.utf8) + [0x1E]
        )
        #expect(responses.lines == ["{}", #"{"error":"nope","minorVersion":3}"#])
        let bad = runAllChunkings(.signalRHandshakeRequest, Array(#"{"version":1}"#.utf8) + [0x1E])
        #expect(bad.lines == [#"{"error":"Missing required property 'protocol'. Message content: {\"version\":1}"}"#])
        #expect(bad.status == 1)
    }

    @Test func parsesArguments() {
        #expect(
            parseDecodeArguments(["--format", "signalr-json"])?.command.chunkSize == DecodeCommand.defaultChunkSize
        )
        #expect(parseDecodeArguments(["--format", "signalr-msgpack", "--chunk", "5", "file.bin"])?.path == "file.bin")
        #expect(parseDecodeArguments(["--format", "nope"]) == nil)
        #expect(parseDecodeArguments(["--chunk", "0", "--format", "signalr-json"]) == nil)
        #expect(parseDecodeArguments([]) == nil)
    }
}
