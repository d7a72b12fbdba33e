// swift-tools-version:6.2
import PackageDescription

/// Settings every Swift target shares (Specs/conventions.md).
let strictSettings: [SwiftSetting] = [
    .enableUpcomingFeature("ExistentialAny"),
    .enableUpcomingFeature("InternalImportsByDefault"),
    .enableUpcomingFeature("MemberImportVisibility"),
    .treatAllWarnings(as: .error),
]

/// Pure (sans-IO) targets additionally opt into strict memory safety. `Lifetimes` lets TetherCore
/// give arrays a span on systems before `Array.span` (`Sources/Core/TetherCore/Support/BackDeployment.swift`).
let pureSettings: [SwiftSetting] = strictSettings + [.strictMemorySafety(), .enableExperimentalFeature("Lifetimes")]

let package = Package(
    name: "Tether",
    // The Swift 6 runtime's systems. No standard-library API above them is used outside
    // availability-guarded code: `.ci/check-availability.py` checks it (Specs/platforms.md).
    platforms: [.macOS(.v15), .iOS(.v18), .tvOS(.v18), .watchOS(.v11), .visionOS(.v2)],
    products: [
        .library(name: "TetherCore", targets: ["TetherCore"]),
        .library(name: "TetherText", targets: ["TetherText"]),
        .library(name: "TetherJSON", targets: ["TetherJSON"]),
        .library(name: "TetherMessagePack", targets: ["TetherMessagePack"]),
        .library(name: "TetherSignalR", targets: ["TetherSignalR"]),
        .library(name: "TetherXML", targets: ["TetherXML"]),
        .library(name: "TetherXMPP", targets: ["TetherXMPP"]),
        .library(name: "TetherDNS", targets: ["TetherDNS"]),
        .library(name: "TetherHTTP", targets: ["TetherHTTP"]),
        .library(name: "TetherTLS", targets: ["TetherTLS"]),
        .library(name: "TetherDispatch", targets: ["TetherDispatch"]),
        .library(name: "TetherXMPPClient", targets: ["TetherXMPPClient"]),
        .library(name: "TetherSignalRClient", targets: ["TetherSignalRClient"]),
        .executable(name: "tether", targets: ["tether"]),
        .executable(name: "tether-bench", targets: ["TetherBench"]),
    ],
    targets: [
        // Sources/ is grouped by layer: Core (the machine kit), Codecs (text kernels and plumbing,
        // JSON, MessagePack, XML), Protocols (DNS, HTTP and WebSocket, TLS, SignalR, XMPP: sans-IO),
        // Drivers (Dispatch and the two clients), Tools (the CLI). Specs/modules.md is the map.

        // MARK: Core
        /// The machine kit: the contract every connection machine follows, time and timers,
        /// reconnect and liveness policies, device inputs, health, and the seams to TLS and SCRAM.
        .target(name: "TetherCore", path: "Sources/Core/TetherCore", swiftSettings: pureSettings),

        // MARK: Codecs
        /// Text kernels in C with portable vector types (SSE2 / NEON from one source).
        .target(name: "CTetherText", path: "Sources/Codecs/CTetherText"),
        /// The kernels' Swift side and the text plumbing the codecs share (UTF-8 validation, byte
        /// scanning, key sets, member indexes, interned strings, container stacks).
        .target(
            name: "TetherText",
            dependencies: ["TetherCore", "CTetherText"],
            path: "Sources/Codecs/TetherText",
            swiftSettings: pureSettings
        ),
        .target(
            name: "TetherJSON",
            dependencies: ["TetherCore", "TetherText", "CTetherText"],
            path: "Sources/Codecs/TetherJSON",
            swiftSettings: pureSettings
        ),
        .target(
            name: "TetherMessagePack",
            dependencies: ["TetherCore", "TetherText"],
            path: "Sources/Codecs/TetherMessagePack",
            swiftSettings: pureSettings
        ),
        /// The system Expat (Debian: libexpat1-dev).
        .systemLibrary(
            name: "CExpat",
            path: "Sources/Codecs/CExpat",
            pkgConfig: "expat",
            providers: [.apt(["libexpat1-dev"])]
        ),
        .target(
            name: "TetherXML",
            dependencies: ["TetherCore", "CExpat"],
            path: "Sources/Codecs/TetherXML",
            swiftSettings: pureSettings
        ),

        // MARK: Protocols (sans-IO)
        /// DNS messages and the resolver machine (SRV, A, AAAA over UDP with TCP fallback).
        .target(
            name: "TetherDNS",
            dependencies: ["TetherCore"],
            path: "Sources/Protocols/TetherDNS",
            swiftSettings: pureSettings
        ),
        /// HTTP/1.1 messages, the RFC 6455 WebSocket client, Server-Sent Events and the HTTP
        /// transport machine (long polling, event streams).
        .target(
            name: "TetherHTTP",
            dependencies: ["TetherCore", "TetherText"],
            path: "Sources/Protocols/TetherHTTP",
            swiftSettings: pureSettings
        ),
        /// The system OpenSSL 3 (Debian: libssl-dev): libcrypto and libssl.
        .systemLibrary(
            name: "COpenSSL",
            path: "Sources/Protocols/COpenSSL",
            pkgConfig: "openssl",
            providers: [.apt(["libssl-dev"])]
        ),
        /// OpenSSL-backed pieces: SCRAM's hash provider and the sans-IO TLS session.
        .target(
            name: "TetherTLS",
            dependencies: ["COpenSSL", "TetherCore"],
            path: "Sources/Protocols/TetherTLS",
            swiftSettings: strictSettings
        ),
        .target(
            name: "TetherSignalR",
            dependencies: ["TetherCore", "TetherText", "TetherJSON", "TetherMessagePack"],
            path: "Sources/Protocols/TetherSignalR",
            swiftSettings: pureSettings
        ),
        .target(
            name: "TetherXMPP",
            dependencies: ["TetherCore", "TetherXML", "TetherDNS"],
            path: "Sources/Protocols/TetherXMPP",
            swiftSettings: pureSettings
        ),

        // MARK: Drivers
        /// The Dispatch driver both clients run on: sockets (Happy Eyeballs), the transports (TCP,
        /// TLS, WebSocket, Server-Sent Events, long polling), the generic runner, timers, the
        /// hand-off to awaiting tasks. OpenSSL only on Linux.
        /// The platform resolver's configuration (its nameservers) through its API: `res_ninit`
        /// (glibc), `res_9_ninit` (Apple, where `/etc/resolv.conf` cannot be read).
        .target(
            name: "CSystemResolver",
            path: "Sources/Drivers/CSystemResolver",
            linkerSettings: [.linkedLibrary("resolv")]
        ),
        /// The kernel's readiness queue (epoll, kqueue) for the shared read threads.
        .target(
            name: "CEventPoll",
            path: "Sources/Drivers/CEventPoll"
        ),
        .target(
            name: "TetherDispatch",
            dependencies: [
                "TetherCore", "TetherHTTP", "TetherDNS", "CSystemResolver", "CEventPoll",
                .target(name: "TetherTLS", condition: .when(platforms: [.linux])),
            ],
            path: "Sources/Drivers/TetherDispatch",
            swiftSettings: strictSettings
        ),
        /// `XMPPClient`: `XMPPClientMachine` on the Dispatch driver (links no SignalR, JSON or MessagePack).
        .target(
            name: "TetherXMPPClient",
            dependencies: [
                "TetherDispatch", "TetherCore", "TetherXML", "TetherXMPP", "TetherDNS",
                .target(name: "TetherTLS", condition: .when(platforms: [.linux])),
            ],
            path: "Sources/Drivers/TetherXMPPClient",
            swiftSettings: strictSettings
        ),
        /// `HubConnection`: `HubConnectionMachine` on the Dispatch driver (links no XMPP code and no Expat).
        .target(
            name: "TetherSignalRClient",
            dependencies: ["TetherDispatch", "TetherCore", "TetherSignalR"],
            path: "Sources/Drivers/TetherSignalRClient",
            swiftSettings: strictSettings
        ),

        // MARK: Tools
        .executableTarget(
            name: "tether",
            dependencies: [
                "TetherCore", "TetherJSON", "TetherSignalR", "TetherXML", "TetherXMPP", "TetherDispatch",
                "TetherXMPPClient", "TetherSignalRClient",
            ],
            path: "Sources/Tools/tether",
            swiftSettings: strictSettings
        ),
        /// Counts malloc calls by interposing the allocator; linked into the benchmark only.
        .target(name: "CMallocCounter", path: "Benchmarks/CMallocCounter"),
        .executableTarget(
            name: "TetherBench",
            dependencies: [
                "TetherCore", "TetherJSON", "TetherMessagePack", "TetherSignalR", "TetherXML", "TetherXMPP",
                "TetherTLS",
                "CExpat",
                "CMallocCounter", "TetherHTTP", "TetherDispatch", "TetherSignalRClient", "TetherXMPPClient",
                "TetherSimulation", "TetherText",
            ],
            path: "Benchmarks/TetherBench",
            swiftSettings: strictSettings
        ),
        /// libFuzzer targets, one per decoder and per machine (build with `--sanitize=fuzzer`; run them all
        /// with Tests/Fuzz/run.sh; see Tests/Fuzz/README.md), and the checks they share.
        .target(
            name: "FuzzSupport",
            dependencies: ["TetherCore", "TetherJSON", "TetherMessagePack", "TetherSignalR", "TetherText"],
            path: "Tests/Fuzz/FuzzSupport",
            swiftSettings: strictSettings
        ),
        .executableTarget(
            name: "FuzzJSONHubProtocol",
            dependencies: ["FuzzSupport", "TetherSignalR"],
            path: "Tests/Fuzz/FuzzJSONHubProtocol",
            swiftSettings: strictSettings
        ),
        .executableTarget(
            name: "FuzzMessagePackHubProtocol",
            dependencies: ["FuzzSupport", "TetherSignalR"],
            path: "Tests/Fuzz/FuzzMessagePackHubProtocol",
            swiftSettings: strictSettings
        ),
        .executableTarget(
            name: "FuzzJSONValue",
            dependencies: ["FuzzSupport", "TetherSignalR"],
            path: "Tests/Fuzz/FuzzJSONValue",
            swiftSettings: strictSettings
        ),
        .executableTarget(
            name: "FuzzMessagePackValue",
            dependencies: ["FuzzSupport", "TetherMessagePack", "TetherSignalR"],
            path: "Tests/Fuzz/FuzzMessagePackValue",
            swiftSettings: strictSettings
        ),
        .executableTarget(
            name: "FuzzHandshakeNegotiate",
            dependencies: ["FuzzSupport", "TetherSignalR"],
            path: "Tests/Fuzz/FuzzHandshakeNegotiate",
            swiftSettings: strictSettings
        ),
        .executableTarget(
            name: "FuzzXMLStream",
            dependencies: ["FuzzSupport", "TetherCore", "TetherXML", "TetherXMPP", "CExpat"],
            path: "Tests/Fuzz/FuzzXMLStream",
            swiftSettings: strictSettings
        ),
        .executableTarget(
            name: "FuzzSCRAM",
            dependencies: ["FuzzSupport", "TetherCore", "TetherTLS", "TetherXMPP"],
            path: "Tests/Fuzz/FuzzSCRAM",
            swiftSettings: strictSettings
        ),
        .executableTarget(
            name: "FuzzWebSocket",
            dependencies: ["FuzzSupport", "TetherHTTP"],
            path: "Tests/Fuzz/FuzzWebSocket",
            swiftSettings: strictSettings
        ),
        .executableTarget(
            name: "FuzzHTTPResponse",
            dependencies: ["FuzzSupport", "TetherHTTP"],
            path: "Tests/Fuzz/FuzzHTTPResponse",
            swiftSettings: strictSettings
        ),
        .executableTarget(
            name: "FuzzDNSMessage",
            dependencies: ["FuzzSupport", "TetherDNS", "TetherCore"],
            path: "Tests/Fuzz/FuzzDNSMessage",
            swiftSettings: strictSettings
        ),
        .executableTarget(
            name: "FuzzServerSentEvents",
            dependencies: ["TetherCore", "FuzzSupport", "TetherHTTP"],
            path: "Tests/Fuzz/FuzzServerSentEvents",
            swiftSettings: strictSettings
        ),
        .executableTarget(
            name: "FuzzHTTPTransport",
            dependencies: ["FuzzSupport", "TetherCore", "TetherHTTP"],
            path: "Tests/Fuzz/FuzzHTTPTransport",
            swiftSettings: strictSettings
        ),
        .executableTarget(
            name: "FuzzDNSResolver",
            dependencies: ["FuzzSupport", "TetherCore", "TetherDNS"],
            path: "Tests/Fuzz/FuzzDNSResolver",
            swiftSettings: strictSettings
        ),
        .executableTarget(
            name: "FuzzTLSRecords",
            dependencies: ["FuzzSupport", "TetherTLS"],
            path: "Tests/Fuzz/FuzzTLSRecords",
            swiftSettings: strictSettings
        ),
        .executableTarget(
            name: "FuzzHubConnection",
            dependencies: ["FuzzSupport", "TetherSignalR", "TetherCore"],
            path: "Tests/Fuzz/FuzzHubConnection",
            swiftSettings: strictSettings
        ),
        .executableTarget(
            name: "FuzzXMPPClient",
            dependencies: ["FuzzSupport", "TetherCore", "TetherTLS", "TetherXML", "TetherXMPP"],
            path: "Tests/Fuzz/FuzzXMPPClient",
            swiftSettings: strictSettings
        ),
        .testTarget(
            name: "TetherCoreTests",
            dependencies: ["TetherCore"],
            swiftSettings: strictSettings
        ),
        .testTarget(
            name: "TetherTextTests",
            dependencies: ["TetherTestSupport", "TetherText", "TetherCore"],
            swiftSettings: strictSettings
        ),
        .testTarget(
            name: "TetherDNSTests",
            dependencies: ["TetherTestSupport", "TetherDNS", "TetherCore"],
            swiftSettings: strictSettings
        ),
        .testTarget(
            name: "TetherJSONTests",
            dependencies: ["TetherTestSupport", "TetherJSON", "TetherCore", "TetherText", "CTetherText"],
            swiftSettings: strictSettings
        ),
        .testTarget(
            name: "TetherMessagePackTests",
            dependencies: ["TetherTestSupport", "TetherMessagePack", "TetherCore", "TetherText"],
            swiftSettings: strictSettings
        ),
        .testTarget(
            name: "TetherSignalRTests",
            dependencies: [
                "TetherTestSupport",
                "TetherSignalR", "TetherJSON", "TetherMessagePack", "TetherCore", "CTetherText", "TetherSimulation",
                "TetherText", "TetherHTTP",
            ],
            swiftSettings: strictSettings
        ),
        .testTarget(
            name: "TetherXMLTests",
            dependencies: ["TetherTestSupport", "TetherXML", "TetherCore"],
            swiftSettings: strictSettings
        ),
        .testTarget(
            name: "TetherXMPPTests",
            dependencies: [
                "TetherTestSupport", "TetherXMPP", "TetherXML", "TetherCore", "TetherTLS", "TetherSimulation",
                "TetherDNS",
            ],
            swiftSettings: strictSettings
        ),
        /// The machine contract, one suite run against every machine, and property tests with
        /// shrinking against a reference model of what must be delivered exactly once.
        .testTarget(
            name: "TetherContractTests",
            dependencies: ["TetherCore", "TetherSignalR", "TetherTLS", "TetherXML", "TetherXMPP", "TetherSimulation"],
            swiftSettings: strictSettings
        ),
        /// Real servers for the tests: a throw-away prosody or aiosignalr hub on 127.0.0.1, a byte
        /// relay to cut, a TLS relay, a throw-away CA.
        .target(
            name: "TetherTestServers",
            dependencies: ["TetherTestSupport"],
            path: "Tests/TetherTestServers",
            exclude: ["Resources"],
            swiftSettings: strictSettings
        ),
        /// What the test targets share that is not a server: `expectThrows` (an error's kind checked,
        /// not only its type).
        .target(
            name: "TetherTestSupport",
            dependencies: [],
            path: "Tests/TetherTestSupport",
            swiftSettings: strictSettings
        ),
        /// Deterministic network simulations: the machines against scripted servers on a virtual
        /// network and clock (the tests' seeds, the benchmark's soak).
        .target(
            name: "TetherSimulation",
            dependencies: ["TetherCore", "TetherDNS", "TetherSignalR", "TetherTLS", "TetherXML", "TetherXMPP"],
            path: "Tests/TetherSimulation",
            swiftSettings: strictSettings
        ),
        .testTarget(
            name: "TetherHTTPTests",
            dependencies: ["TetherTestSupport", "TetherHTTP", "TetherCore", "TetherSimulation"],
            swiftSettings: strictSettings
        ),
        .testTarget(
            name: "TetherTLSTests",
            dependencies: ["TetherTestSupport", "TetherTLS", "TetherCore", "COpenSSL", "TetherTestServers"],
            swiftSettings: strictSettings
        ),
        .testTarget(
            name: "TetherDispatchTests",
            dependencies: [
                "TetherTestSupport",
                "TetherDispatch", "TetherXMPPClient", "TetherSignalRClient", "TetherTestServers", "TetherXMPP",
                "TetherXML", "TetherSignalR", "TetherCore", "TetherDNS",
            ],
            swiftSettings: strictSettings
        ),
        /// The README's Swift blocks, compiled (`Examples/`, checked equal to the README), and its two
        /// client examples run against prosody and aiosignalr.
        .testTarget(
            name: "TetherReadmeTests",
            dependencies: [
                "TetherXMPPClient", "TetherSignalRClient", "TetherTestServers", "TetherXMPP", "TetherXML",
                "TetherSignalR", "TetherCore", "TetherDispatch",
            ],
            swiftSettings: strictSettings
        ),
        .testTarget(
            name: "TetherCLITests",
            dependencies: ["tether", "TetherTestServers", "TetherXMPP", "TetherSignalR", "TetherCore"],
            swiftSettings: strictSettings
        ),
    ]
)
