@main struct RelayChat { static func main() async {} }
