package main

func main() { serve() }
